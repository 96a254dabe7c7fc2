package endpoints

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"https://a:8787":                    "https://a:8787",
		"https://a:8787/":                   "https://a:8787",
		" http://a:1 , https://b:2/,":       "http://a:1 https://b:2",
		"https://a:1,https://a:1/,http://b": "https://a:1 http://b",
	} {
		got, err := Parse(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " , ", "a:8787", "https://a:1,ftp://b", "https://"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v; want an error", bad, got)
		}
	}
}

// TestCallerCancelDoesNotFailOver: a request its caller cancelled is not
// sent to the next server, and the server it was on stays first.
func TestCallerCancelDoesNotFailOver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var second int
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second++ }))
	defer b.Close()
	l, err := New(a.URL + "," + b.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Do(http.DefaultClient, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	})
	if err == nil || second != 0 {
		t.Errorf("Do = %v with %d requests to the second server; want the cancellation, and none", err, second)
	}
	if l.Current() != a.URL {
		t.Errorf("Current = %s; want %s still", l.Current(), a.URL)
	}
}
