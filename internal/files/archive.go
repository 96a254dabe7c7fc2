package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Pack writes the tree under dir to w as a gzip-compressed tar with paths
// relative to dir. Regular files, directories and symlinks are kept; other
// file types (sockets, devices, fifos) are skipped.
func Pack(w io.Writer, dir string) error {
	return PackFunc(w, dir, nil)
}

// PackFunc is Pack with a filter: skip(rel, d) true leaves that entry out
// (and, for a directory, everything under it). rel uses forward slashes.
//
// An empty tree is written as emptyArchive without a compressor: most
// jobs leave their outputs folder empty, and a gzip compressor's tables
// (several hundred KB) were most of what a node agent allocated per job.
func PackFunc(w io.Writer, dir string, skip func(rel string, d fs.DirEntry) bool) error {
	var gz *gzip.Writer
	var tw *tar.Writer
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode().IsRegular(), info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if tw == nil {
			gz = gzip.NewWriter(w)
			tw = tar.NewWriter(gz)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// Copy exactly the size in the header: a file that grows while it
		// is packed must not corrupt the archive.
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("pack %s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	if tw == nil {
		if _, err := w.Write(emptyArchive); err != nil {
			return fmt.Errorf("pack %s: %w", dir, err)
		}
		return nil
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return nil
}

// EmptyTree reports whether PackFunc(w, dir, skip) would pack nothing:
// dir holds no entry it keeps (a regular file, a folder or a symlink
// that skip does not leave out).
func EmptyTree(dir string, skip func(rel string, d fs.DirEntry) bool) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, d := range ents {
		if skip != nil && skip(d.Name(), d) {
			continue
		}
		if t := d.Type(); t.IsRegular() || t.IsDir() || t&fs.ModeSymlink != 0 {
			return false, nil
		}
	}
	return true, nil
}

// EmptyArchive is what Pack writes for an empty tree.
func EmptyArchive() *bytes.Reader { return bytes.NewReader(emptyArchive) }

// emptyArchive is what Pack writes for an empty tree, and what a gzip
// writer makes of a tar writer closed at once: the end-of-archive blocks
// (1,024 zero bytes), compressed.
var emptyArchive = []byte{0x1f, 0x8b, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0xff, 0x62, 0x18, 0x5, 0xa3, 0x60, 0x14,
	0x8c, 0x58, 0x0, 0x8, 0x0, 0x0, 0xff, 0xff, 0x2e, 0xaf, 0xb5, 0xef, 0x0, 0x4, 0x0, 0x0}

// ErrUnsafePath is returned (wrapped) by Unpack for an entry that would land
// outside the target directory.
var ErrUnsafePath = errors.New("unsafe path in archive")

// Unpack extracts a gzip-compressed tar from r into dir (created if
// missing). Entries with absolute paths or ".." components, symlinks and
// hard links that point outside dir, and writes through symlinks that lead
// outside dir are rejected with ErrUnsafePath. Set-id bits are dropped;
// file types other than regular files, directories and links are skipped.
func Unpack(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer root.Close()
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		if err := extract(root, tr, hdr); err != nil {
			return fmt.Errorf("unpack %q: %w", hdr.Name, err)
		}
	}
}

// cleanRel turns an archive path into a clean relative path, or fails if
// it is absolute or climbs out of the root.
func cleanRel(name string) (string, error) {
	name = strings.ReplaceAll(name, "\\", "/")
	if path.IsAbs(name) || filepath.IsAbs(name) {
		return "", fmt.Errorf("%w: absolute path", ErrUnsafePath)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: path climbs out of the directory", ErrUnsafePath)
		}
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// insideLink reports whether a link at rel pointing to target stays inside
// the root.
func insideLink(rel, target string) bool {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return false
	}
	joined := path.Join(path.Dir(rel), target)
	return joined != ".." && !strings.HasPrefix(joined, "../")
}

func extract(root *os.Root, tr *tar.Reader, hdr *tar.Header) error {
	rel, err := cleanRel(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" {
		return nil // the root itself
	}
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return err
		}
		return root.Chmod(rel, mode|0o700)
	case tar.TypeReg, tar.TypeRegA:
		// Replace whatever is there (a symlink included) instead of
		// writing through it.
		if err := removeExisting(root, rel); err != nil {
			return err
		}
		f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if !hdr.ModTime.IsZero() {
			return root.Chtimes(rel, hdr.ModTime, hdr.ModTime)
		}
		return nil
	case tar.TypeSymlink:
		if !insideLink(rel, hdr.Linkname) {
			return fmt.Errorf("%w: symlink to %q points outside the directory", ErrUnsafePath, hdr.Linkname)
		}
		if err := removeExisting(root, rel); err != nil {
			return err
		}
		return root.Symlink(hdr.Linkname, rel)
	case tar.TypeLink:
		target, err := cleanRel(hdr.Linkname)
		if err != nil || target == "" {
			return fmt.Errorf("%w: hard link to %q points outside the directory", ErrUnsafePath, hdr.Linkname)
		}
		if err := removeExisting(root, rel); err != nil {
			return err
		}
		return root.Link(target, rel)
	default:
		return nil
	}
}

func removeExisting(root *os.Root, rel string) error {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("a directory is in the way")
	}
	return root.Remove(rel)
}

// PackFile writes an archive that holds one file, name, with content.
func PackFile(w io.Writer, name string, content []byte) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	if _, err := tw.Write(content); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	return gz.Close()
}

// WalkFiles calls fn for each regular file of a folder archive (tar.gz),
// in archive order, with its clean relative path (forward slashes) and
// its content. Folders and links are skipped; an unsafe path fails.
func WalkFiles(r io.Reader, fn func(rel string, size int64, content io.Reader) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		rel, err := cleanRel(hdr.Name)
		if err != nil {
			return fmt.Errorf("read archive %q: %w", hdr.Name, err)
		}
		if rel == "" {
			continue
		}
		if err := fn(rel, hdr.Size, tr); err != nil {
			return err
		}
	}
}
