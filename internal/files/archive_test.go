package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, body, link string
	typ              byte
}

func makeTarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "f.txt"), []byte("deep"), 0o644)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("a/b/f.txt", filepath.Join(src, "link"))
	os.MkdirAll(filepath.Join(src, "skipme"), 0o755)
	os.WriteFile(filepath.Join(src, "skipme", "x"), []byte("x"), 0o644)

	var buf bytes.Buffer
	if err := PackFunc(&buf, src, func(rel string, _ os.DirEntry) bool { return rel == "skipme" }); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := Unpack(&buf, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "link")); err != nil || string(b) != "deep" {
		t.Errorf("link: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode: %v, %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "skipme")); !os.IsNotExist(err) {
		t.Errorf("skipped folder was packed: %v", err)
	}
}

func TestUnpackRejectsEscapes(t *testing.T) {
	for name, entries := range map[string][]entry{
		"dot-dot":           {{name: "../evil.txt", body: "x"}},
		"nested dot-dot":    {{name: "a/../../evil.txt", body: "x"}},
		"absolute":          {{name: "/tmp/evil.txt", body: "x"}},
		"symlink outside":   {{name: "link", typ: tar.TypeSymlink, link: "../../etc"}},
		"absolute symlink":  {{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"}},
		"hard link outside": {{name: "hl", typ: tar.TypeLink, link: "../outside"}},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			err := Unpack(bytes.NewReader(makeTarGz(t, entries...)), dst)
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("Unpack = %v; want ErrUnsafePath", err)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil.txt")); err == nil {
				t.Fatal("a file was written outside the directory")
			}
		})
	}
}

func TestUnpackDoesNotWriteThroughSymlinks(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	os.MkdirAll(outside, 0o755)
	dst := filepath.Join(parent, "dst")
	os.MkdirAll(dst, 0o755)
	// A symlink already in the directory (say, from an earlier unpack)
	// points outside; entries under it must not land there.
	os.Symlink(outside, filepath.Join(dst, "escape"))
	err := Unpack(bytes.NewReader(makeTarGz(t, entry{name: "escape/pwned", body: "x"})), dst)
	if err == nil {
		t.Fatal("Unpack wrote through a symlink that leaves the directory")
	}
	if _, err := os.Stat(filepath.Join(outside, "pwned")); err == nil {
		t.Fatal("a file was written outside the directory")
	}
	// An in-archive symlink to a file is replaced, not written through.
	err = Unpack(bytes.NewReader(makeTarGz(t,
		entry{name: "target", body: "keep"},
		entry{name: "l", typ: tar.TypeSymlink, link: "target"},
		entry{name: "l", body: "new"},
	)), dst)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "target")); string(b) != "keep" {
		t.Errorf("target = %q; the write went through the symlink", b)
	}
}

// An empty tree packs to the same bytes a gzip-compressed empty tar is
// (without making a compressor), and unpacks to nothing.
func TestPackEmptyTree(t *testing.T) {
	var want bytes.Buffer
	gz := gzip.NewWriter(&want)
	if err := tar.NewWriter(gz).Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var got bytes.Buffer
	if err := Pack(&got, dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("empty tree packed to %x; a gzip-compressed empty tar is %x", got.Bytes(), want.Bytes())
	}
	out := t.TempDir()
	if err := Unpack(&got, out); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("the empty archive unpacked to %d entries", len(ents))
	}
	// A tree whose only entry is skipped is empty too.
	if err := os.WriteFile(filepath.Join(dir, "skipped"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if err := PackFunc(&got, dir, func(string, fs.DirEntry) bool { return true }); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("a tree of skipped entries packed to %x, %v", got.Bytes(), err)
	}
}

// EmptyTree says a tree is empty exactly when PackFunc packs nothing of it:
// skipped entries and sockets do not count; an empty folder does.
func TestEmptyTreeAgreesWithPack(t *testing.T) {
	dir := t.TempDir()
	skipNamed := func(rel string, _ fs.DirEntry) bool { return rel == "named" }
	check := func(what string, skip func(string, fs.DirEntry) bool) {
		t.Helper()
		var b bytes.Buffer
		if err := PackFunc(&b, dir, skip); err != nil {
			t.Fatal(err)
		}
		packedNothing := bytes.Equal(b.Bytes(), emptyArchive)
		empty, err := EmptyTree(dir, skip)
		if err != nil || empty != packedNothing {
			t.Errorf("%s: EmptyTree = %v, %v; PackFunc packed nothing: %v", what, empty, err, packedNothing)
		}
	}
	check("no entries", nil)
	if err := os.MkdirAll(filepath.Join(dir, "named"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "named", "w.bin"), []byte("w"), 0o644)
	check("a skipped folder", skipNamed)
	check("a folder not skipped", nil)
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	check("a socket beside a skipped folder", skipNamed)
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("an empty folder", skipNamed)
	if _, err := EmptyTree(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("EmptyTree of a missing folder: no error")
	}
}
