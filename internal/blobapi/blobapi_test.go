package blobapi

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func testSigner(msg string) string { return "sig(" + msg + ")" }

// A SAS is good for its account, container (or blob), permissions and
// time, and for nothing else.
func TestSAS(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	q, _ := url.ParseQuery(Sign(testSigner, "acct", "c1", "", SAS{Resource: ResourceContainer, Perms: "rl", Expiry: now.Add(time.Hour), Principal: "alice"}))
	if s, err := Verify(testSigner, "acct", "c1", "", q, now, PermRead); err != nil || s.Principal != "alice" {
		t.Fatalf("valid SAS: %+v, %v", s, err)
	}
	for _, c := range []struct {
		name               string
		account, container string
		at                 time.Time
		perm               byte
		want               error
	}{
		{"other container", "acct", "c2", now, PermRead, ErrAuthFailed},
		{"other account", "acct2", "c1", now, PermRead, ErrAuthFailed},
		{"expired", "acct", "c1", now.Add(time.Hour), PermRead, ErrAuthFailed},
		{"write with a read SAS", "acct", "c1", now, PermWrite, ErrPermission},
	} {
		if _, err := Verify(testSigner, c.account, c.container, "", q, c.at, c.perm); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	tampered, _ := url.ParseQuery(q.Encode())
	tampered.Set("sp", "racwdl")
	if _, err := Verify(testSigner, "acct", "c1", "", tampered, now, PermWrite); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("widened permissions: %v", err)
	}
	if _, err := Verify(testSigner, "acct", "c1", "", url.Values{}, now, PermRead); !errors.Is(err, ErrNoAuth) {
		t.Errorf("no SAS: %v", err)
	}
	// A blob SAS opens its blob only.
	b, _ := url.ParseQuery(Sign(testSigner, "acct", "c1", "logs/a.txt", SAS{Resource: ResourceBlob, Perms: "r", Expiry: now.Add(time.Minute)}))
	if _, err := Verify(testSigner, "acct", "c1", "logs/a.txt", b, now, PermRead); err != nil {
		t.Errorf("blob SAS on its blob: %v", err)
	}
	if _, err := Verify(testSigner, "acct", "c1", "logs/b.txt", b, now, PermRead); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("blob SAS on another blob: %v", err)
	}
	if s := Strip(q); s.Get("sig") != "" || s.Get("se") != "" {
		t.Errorf("Strip left %v", s)
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		h          string
		size       int64
		start, end int64
		ok         bool
		err        bool
	}{
		{"", 10, 0, 0, false, false},
		{"bytes=0-4", 10, 0, 4, true, false},
		{"bytes=5-", 10, 5, 9, true, false},
		{"bytes=0-33554431", 10, 0, 9, true, false},
		{"bytes=10-20", 10, 0, 0, false, true},
		{"bytes=0-0", 0, 0, 0, false, true},
		{"bytes=4-2", 10, 0, 0, false, true},
		{"items=0-1", 10, 0, 0, false, true},
	} {
		r, ok, err := ParseRange(c.h, c.size)
		if ok != c.ok || (err != nil) != c.err || (ok && (r.Start != c.start || r.End != c.end)) {
			t.Errorf("ParseRange(%q, %d) = %+v %v %v", c.h, c.size, r, ok, err)
		}
	}
}

func TestBlockListAndListing(t *testing.T) {
	refs, err := ParseBlockList([]byte(`<?xml version="1.0" encoding="utf-8"?><BlockList><Latest>YQ==</Latest><Uncommitted> Yg== </Uncommitted></BlockList>`))
	if err != nil || len(refs) != 2 || refs[0] != (BlockRef{"YQ==", "Latest"}) || refs[1].ID != "Yg==" {
		t.Errorf("block list = %+v, %v", refs, err)
	}
	if _, err := ParseBlockList([]byte(`<Other/>`)); err == nil {
		t.Error("a body that is not a BlockList was read")
	}
	out := string(MarshalList(ListResult{Container: "c", Prefix: "p/", MaxResults: 2, WithMetadata: true, NextMarker: "p/z",
		Blobs: []Blob{{Name: "p/a&b", Size: 3, ETag: `"0x1"`, Metadata: map[string]string{"name": "x"}}}, Prefixes: []string{"p/d/"}}))
	for _, want := range []string{`<Name>p/a&amp;b</Name>`, `<Content-Length>3</Content-Length>`, `<Metadata><name>x</name></Metadata>`,
		`<BlobPrefix><Name>p/d/</Name></BlobPrefix>`, `<NextMarker>p/z</NextMarker>`, `<BlobType>BlockBlob</BlobType>`} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %s:\n%s", want, out)
		}
	}
}
