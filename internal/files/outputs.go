package files

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Outputs keeps each job's outputs: one archive (tar.gz) per output name,
// attempt and rank, as each node of the job uploads its folder, under
// Dir/<uid>/<name>/a<attempt>-r<rank>.tar.gz. A reader gets one archive
// per name, the ranks' files merged (Merge): a multi-node job has one
// output location, as if every rank wrote into the same folder.
//
// An upload its node left empty need not be a file here: the readers take
// the parts the caller knows to be empty (a Part with no Path; the job
// record keeps them) as uploads of an empty folder.
type Outputs struct{ Dir string }

// Part is one node's upload of one output. A Part with no Path is an
// empty one.
type Part struct {
	Attempt, Rank int
	Path          string
}

func (o Outputs) dir(uid, name string) string { return filepath.Join(o.Dir, uid, name) }

// legacy is where a single archive per name was kept before uploads were
// per rank; it reads as attempt 0, rank 0.
func (o Outputs) legacy(uid, name string) string {
	return filepath.Join(o.Dir, uid, name+".tar.gz")
}

// Put stores rank's upload of an output in an attempt, replacing that
// rank's earlier upload in the same attempt.
func (o Outputs) Put(uid, name string, attempt, rank int, r io.Reader, maxBytes int64) error {
	if attempt < 0 || rank < 0 {
		return fmt.Errorf("output %s: attempt %d rank %d", name, attempt, rank)
	}
	p := filepath.Join(o.dir(uid, name), "a"+strconv.Itoa(attempt)+"-r"+strconv.Itoa(rank)+".tar.gz")
	return writeVerified(p, "", r, maxBytes)
}

// parts lists the uploads of an output, with the empty ones given, oldest
// attempt first, then by rank; a rank's file comes after its empty part of
// the same attempt.
func (o Outputs) parts(uid, name string, empty []Part) []Part {
	out := slices.Clone(empty)
	if _, err := os.Stat(o.legacy(uid, name)); err == nil {
		out = append(out, Part{Path: o.legacy(uid, name)})
	}
	ents, _ := os.ReadDir(o.dir(uid, name))
	for _, e := range ents {
		var a, r int
		base, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok {
			continue
		}
		if _, err := fmt.Sscanf(base, "a%d-r%d", &a, &r); err != nil {
			continue
		}
		out = append(out, Part{Attempt: a, Rank: r, Path: filepath.Join(o.dir(uid, name), e.Name())})
	}
	sort.SliceStable(out, func(i, k int) bool {
		if out[i].Attempt != out[k].Attempt {
			return out[i].Attempt < out[k].Attempt
		}
		return out[i].Rank < out[k].Rank
	})
	return out
}

// Open opens an output of the job's latest attempt that uploaded it, every
// rank's files merged; empty are the parts of it its nodes left empty (see
// Outputs). The file is private to the caller (close it).
func (o Outputs) Open(uid, name string, empty ...Part) (*os.File, error) {
	ps := o.Latest(uid, name, empty...)
	if len(ps) == 0 {
		return nil, fmt.Errorf("output %s: %w", name, ErrNotFound)
	}
	return o.open(uid, ps)
}

// Latest lists the parts of the latest attempt of an output that has any,
// the empty ones given included; none when the output has no part at all.
// OpenParts opens them as Open does.
func (o Outputs) Latest(uid, name string, empty ...Part) []Part {
	ps := o.parts(uid, name, empty)
	if len(ps) == 0 {
		return nil
	}
	last := ps[len(ps)-1].Attempt
	return slices.DeleteFunc(ps, func(p Part) bool { return p.Attempt != last })
}

// OpenParts opens parts of a job's output (Latest's), merged.
func (o Outputs) OpenParts(uid string, ps []Part) (*os.File, error) { return o.open(uid, ps) }

// AllEmpty reports whether parts are all empty ones (no rank's file).
func AllEmpty(ps []Part) bool {
	return !slices.ContainsFunc(ps, func(p Part) bool { return p.Path != "" })
}

// OpenAll opens an output merged across every attempt (a later attempt's
// file replaces an earlier one's): what a checkpoint is, when each attempt
// uploads only the files it wrote.
func (o Outputs) OpenAll(uid, name string) (*os.File, error) {
	ps := o.parts(uid, name, nil)
	if len(ps) == 0 {
		return nil, fmt.Errorf("output %s: %w", name, ErrNotFound)
	}
	return o.open(uid, ps)
}

// open merges the parts into a file of their own; the empty ones add
// nothing.
func (o Outputs) open(uid string, ps []Part) (*os.File, error) {
	ps = slices.DeleteFunc(slices.Clone(ps), func(p Part) bool { return p.Path == "" })
	if len(ps) == 1 {
		return os.Open(ps[0].Path)
	}
	dir := filepath.Join(o.Dir, uid)
	if len(ps) == 0 {
		dir = "" // the job may have no folder here: nothing was uploaded
	}
	tmp, err := os.CreateTemp(dir, ".merged-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("merge outputs: %w", err)
	}
	os.Remove(tmp.Name()) // the open file lives on until closed
	if len(ps) == 0 {
		_, err = io.Copy(tmp, EmptyArchive())
	} else {
		_, err = Merge(tmp, ps)
	}
	if err != nil {
		tmp.Close()
		return nil, fmt.Errorf("merge outputs: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		tmp.Close()
		return nil, err
	}
	return tmp, nil
}

// Has reports whether a job has an output of that name uploaded as a file
// (an empty one kept with the job is not looked for).
func (o Outputs) Has(uid, name string) bool { return len(o.parts(uid, name, nil)) > 0 }

// Names lists the outputs stored for a job, with those named in empty.
func (o Outputs) Names(uid string, empty ...string) []string {
	ents, _ := os.ReadDir(filepath.Join(o.Dir, uid))
	seen := map[string]bool{}
	for _, n := range empty {
		seen[n] = true
	}
	for _, e := range ents {
		n, legacy := strings.CutSuffix(e.Name(), ".tar.gz")
		if (legacy || e.IsDir()) && !strings.HasPrefix(n, ".") {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Remove deletes a job's outputs.
func (o Outputs) Remove(uid string) error { return os.RemoveAll(filepath.Join(o.Dir, uid)) }

// errNoParts is Merge's answer to nothing to merge.
var errNoParts = errors.New("merge outputs: no parts")

// HasPart reports whether one rank's upload of an output in an attempt is
// stored.
func (o Outputs) HasPart(uid, name string, attempt, rank int) bool {
	p := filepath.Join(o.dir(uid, name), "a"+strconv.Itoa(attempt)+"-r"+strconv.Itoa(rank)+".tar.gz")
	_, err := os.Stat(p)
	return err == nil
}
