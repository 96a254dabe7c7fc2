package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// When the API server says a watch's resource version is too old (410,
// after etcd compacted it), the cache lists again and reports what it
// missed: a pod deleted meanwhile as deleted, a new one as added. The API
// server here is a stand-in (a test double) that plays that sequence; the
// lab's real one cannot be made to expire a watch on demand.
func TestPodCacheListsAgainWhenTheWatchExpires(t *testing.T) {
	pod := func(name, rv string) Pod {
		return Pod{ObjectMeta: ObjectMeta{Name: name, ResourceVersion: rv, Annotations: map[string]string{AnnotationNode: name}}}
	}
	var mu sync.Mutex
	lists, watches := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods" || r.URL.Query().Get("labelSelector") != "a=b" {
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		enc := json.NewEncoder(w)
		if r.URL.Query().Get("watch") != "true" {
			lists++
			l := PodList{ListMeta: ListMeta{ResourceVersion: "10"}, Items: []Pod{pod("a", "1"), pod("b", "2")}}
			if lists > 1 { // b went while the watch was lost; c came
				l = PodList{ListMeta: ListMeta{ResourceVersion: "20"}, Items: []Pod{pod("a", "11"), pod("c", "15")}}
			}
			mu.Unlock()
			_ = enc.Encode(l)
			return
		}
		watches++
		n, rv := watches, r.URL.Query().Get("resourceVersion")
		mu.Unlock()
		if n == 1 {
			if rv != "10" {
				t.Errorf("first watch from %q; want the list's version 10", rv)
			}
			_ = enc.Encode(map[string]any{"type": "MODIFIED", "object": pod("a", "11")})
			_ = enc.Encode(map[string]any{"type": "ERROR", "object": map[string]any{"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}})
			return
		}
		if rv != "20" {
			t.Errorf("watch after the second list from %q; want 20", rv)
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, err := newAPIClient(&Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pc := newPodCache(c, "ns", "a=b", slog.New(slog.DiscardHandler))
	var heard []string
	var hmu sync.Mutex
	remove := pc.addHandler(func(p *Pod, deleted bool) {
		hmu.Lock()
		defer hmu.Unlock()
		heard = append(heard, fmt.Sprintf("%s@%s deleted=%v", p.Name, p.ResourceVersion, deleted))
	})
	defer remove()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pc.run(ctx)
	want := []string{"a@1 deleted=false", "b@2 deleted=false", "a@11 deleted=false", "b@2 deleted=true", "c@15 deleted=false"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		hmu.Lock()
		got := slices.Clone(heard)
		hmu.Unlock()
		// The first list's two pods come in either order, as do the
		// second list's differences.
		if len(got) == len(want) {
			slices.Sort(got[:2])
			slices.Sort(got[3:])
			if !slices.Equal(got, want) {
				t.Fatalf("heard %v; want %v", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heard %v; want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var names []string
	for _, p := range pc.list() {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Errorf("cache holds %v; want a and c", names)
	}
}
