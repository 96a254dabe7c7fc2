package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ConflictsFile is the file, at the root of a merged output, that lists
// the paths two ranks of one attempt wrote with different contents.
const ConflictsFile = "cumulus-conflicts.txt"

// Conflict is one path that ranks of one attempt wrote differently: the
// lowest rank's copy keeps the path, every other rank's copy is kept as
// path.rank<N>.
type Conflict struct {
	Path    string
	Kept    int   // the rank whose copy has the path
	Renamed []int // the ranks whose copies are at Path.rank<N>
}

// entryKey identifies one archive entry's content.
type entryKey struct {
	typ  byte
	sum  [sha256.Size]byte
	link string
}

// candidate is one part's entry for a path.
type candidate struct {
	part int
	key  entryKey
}

// Merge writes to w one gzip-compressed tar holding every part's files, as
// if the parts had been unpacked in order into one folder, with two rules
// that make the result deterministic and lose nothing: a later attempt's
// entry replaces an earlier attempt's; within one attempt, when ranks
// wrote the same path with different contents, the lowest rank's copy
// keeps the path and the others are kept beside it as path.rank<N>,
// listed in ConflictsFile. Parts must be in order (attempt, then rank).
func Merge(w io.Writer, parts []Part) ([]Conflict, error) {
	if len(parts) == 0 {
		return nil, errNoParts
	}
	// First pass: what each part holds.
	byPath := map[string][]candidate{}
	dirs := map[string]*tar.Header{}
	for i, p := range parts {
		err := walkArchive(p.Path, func(hdr *tar.Header, r io.Reader) error {
			name, err := cleanRel(hdr.Name)
			if err != nil || name == "" {
				return err
			}
			if hdr.Typeflag == tar.TypeDir {
				if dirs[name] == nil {
					dirs[name] = hdr
				}
				return nil
			}
			k := entryKey{typ: hdr.Typeflag, link: hdr.Linkname}
			if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA {
				h := sha256.New()
				if _, err := io.Copy(h, r); err != nil {
					return err
				}
				copy(k.sum[:], h.Sum(nil))
			}
			byPath[name] = append(byPath[name], candidate{part: i, key: k})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("merge outputs: %s: %w", p.Path, err)
		}
	}
	// Decide: for each path, which part's entry keeps it, which are kept
	// renamed.
	keep := map[string]int{}               // path -> part
	renamed := map[int]map[string]string{} // part -> path -> new path
	var conflicts []Conflict
	for name, cs := range byPath {
		last := parts[cs[len(cs)-1].part].Attempt
		var same []candidate // this attempt's entries, by rank
		for _, c := range cs {
			if parts[c.part].Attempt == last {
				same = append(same, c)
			}
		}
		keep[name] = same[0].part
		var c Conflict
		seen := map[entryKey]bool{same[0].key: true}
		for _, o := range same[1:] {
			if seen[o.key] {
				continue // identical content: one copy is enough
			}
			seen[o.key] = true
			rank := parts[o.part].Rank
			if renamed[o.part] == nil {
				renamed[o.part] = map[string]string{}
			}
			renamed[o.part][name] = name + ".rank" + strconv.Itoa(rank)
			c.Renamed = append(c.Renamed, rank)
		}
		if len(c.Renamed) > 0 {
			c.Path, c.Kept = name, parts[same[0].part].Rank
			conflicts = append(conflicts, c)
		}
	}
	sort.Slice(conflicts, func(i, k int) bool { return conflicts[i].Path < conflicts[k].Path })

	// Second pass: write the chosen entries.
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		if _, clash := byPath[d]; !clash {
			names = append(names, d)
		}
	}
	sort.Strings(names)
	for _, d := range names {
		hdr := *dirs[d]
		hdr.Name = d + "/"
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("merge outputs: %w", err)
		}
	}
	for i, p := range parts {
		err := walkArchive(p.Path, func(hdr *tar.Header, r io.Reader) error {
			name, err := cleanRel(hdr.Name)
			if err != nil || name == "" || hdr.Typeflag == tar.TypeDir {
				return err
			}
			out := ""
			switch {
			case keep[name] == i:
				out = name
			case renamed[i][name] != "":
				out = renamed[i][name]
			default:
				return nil
			}
			h := *hdr
			h.Name = out
			if err := tw.WriteHeader(&h); err != nil {
				return err
			}
			_, err = io.Copy(tw, r)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("merge outputs: %s: %w", p.Path, err)
		}
	}
	if len(conflicts) > 0 {
		report := conflictReport(conflicts)
		hdr := &tar.Header{Name: ConflictsFile, Mode: 0o644, Size: int64(len(report)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("merge outputs: %w", err)
		}
		if _, err := tw.Write(report); err != nil {
			return nil, fmt.Errorf("merge outputs: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("merge outputs: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("merge outputs: %w", err)
	}
	return conflicts, nil
}

// conflictReport is ConflictsFile's text.
func conflictReport(cs []Conflict) []byte {
	var b bytes.Buffer
	b.WriteString("# Paths that ranks of this job wrote with different contents.\n")
	b.WriteString("# The lowest rank's copy keeps the path; the others are beside it as PATH.rank<N>.\n")
	for _, c := range cs {
		var rs []string
		for _, r := range c.Renamed {
			rs = append(rs, strconv.Itoa(r))
		}
		fmt.Fprintf(&b, "%s: kept rank %d; also ranks %s\n", c.Path, c.Kept, strings.Join(rs, ", "))
	}
	return b.Bytes()
}

// walkArchive calls fn for each entry of a gzip-compressed tar.
func walkArchive(path string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if errors.Is(err, io.EOF) {
		return nil // an empty upload
	}
	if err != nil {
		return err
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
}
