package sim

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job is one job of a trace.
type Job struct {
	Line     int           // line of the CSV file it came from; 0 if generated
	Submit   time.Duration // since the start of the trace
	Duration time.Duration // run time once started
	Nodes    int           // instance count; 0: derived from GPUs
	GPUs     int           // GPUs the job used; 0: unknown
	VC       string        // virtual cluster: one simulated cluster per value
	Status   string        // as the trace says; not simulated
}

// Trace is a list of jobs ordered by submission time (ties keep file order).
type Trace struct {
	Name string
	Jobs []Job
	// Columns present in the source, for deriving nodes and for WriteCSV.
	HasNodes, HasGPUs, HasVC, HasStatus bool
}

// Trace columns. submit_time_s and duration_s are required.
const (
	colSubmit   = "submit_time_s"
	colDuration = "duration_s"
	colNodes    = "nodes"
	colGPUs     = "gpus"
	colVC       = "vc"
	colStatus   = "status"
)

// maxRowErrors is how many bad rows an error lists before summing up.
const maxRowErrors = 10

// LoadTrace reads a trace CSV file.
func LoadTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	t, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	t.Name = path
	return t, nil
}

// ReadTrace parses a trace: CSV with a header naming the columns
// submit_time_s and duration_s (seconds, decimals allowed), and optionally
// nodes, gpus, vc and status, in any order and any case; other columns are
// ignored. Bad rows are reported with their line numbers.
func ReadTrace(r io.Reader) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file: want a CSV header with submit_time_s and duration_s")
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := col[h]; dup && h != "" {
			return nil, fmt.Errorf("line 1: column %s appears twice", h)
		}
		col[h] = i
	}
	for _, c := range []string{colSubmit, colDuration} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("line 1: no %s column (the header has %s)", c, strings.Join(header, ","))
		}
	}
	at := func(rec []string, name string) (string, bool) {
		i, ok := col[name]
		if !ok || i >= len(rec) {
			return "", false
		}
		return strings.TrimSpace(rec[i]), true
	}
	t := &Trace{}
	_, t.HasNodes = col[colNodes]
	_, t.HasGPUs = col[colGPUs]
	_, t.HasVC = col[colVC]
	_, t.HasStatus = col[colStatus]

	var bad []string
	nbad := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
				nbad++
				if len(bad) < maxRowErrors {
					bad = append(bad, fmt.Sprintf("line %d: %d fields, the header has %d", pe.Line, len(rec), len(header)))
				}
				continue
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		j, err := parseRow(rec, at)
		if err != nil {
			nbad++
			if len(bad) < maxRowErrors {
				bad = append(bad, fmt.Sprintf("line %d: %v", line, err))
			}
			continue
		}
		j.Line = line
		t.Jobs = append(t.Jobs, j)
	}
	if nbad > 0 {
		msg := strings.Join(bad, "; ")
		if nbad > len(bad) {
			msg += fmt.Sprintf("; and %d more bad rows", nbad-len(bad))
		}
		return nil, errors.New(msg)
	}
	if len(t.Jobs) == 0 {
		return nil, errors.New("no jobs: the file has a header but no rows")
	}
	t.sort()
	return t, nil
}

func parseRow(rec []string, at func([]string, string) (string, bool)) (Job, error) {
	var j Job
	s, _ := at(rec, colSubmit)
	submit, err := seconds(colSubmit, s)
	if err != nil {
		return j, err
	}
	s, _ = at(rec, colDuration)
	dur, err := seconds(colDuration, s)
	if err != nil {
		return j, err
	}
	j.Submit, j.Duration = submit, dur
	if s, ok := at(rec, colNodes); ok && s != "" {
		if j.Nodes, err = count(colNodes, s, 1); err != nil {
			return j, err
		}
	}
	if s, ok := at(rec, colGPUs); ok && s != "" {
		if j.GPUs, err = count(colGPUs, s, 0); err != nil {
			return j, err
		}
	}
	j.VC, _ = at(rec, colVC)
	j.Status, _ = at(rec, colStatus)
	return j, nil
}

// maxSeconds keeps times within time.Duration (about 292 years).
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) / 2

func seconds(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("%s is empty", name)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is not a number of seconds", name, s)
	}
	if v < 0 || v > maxSeconds {
		return 0, fmt.Errorf("%s %s is out of range (0 to %.0f seconds)", name, s, maxSeconds)
	}
	return time.Duration(math.Round(v * float64(time.Second))), nil
}

func count(name, s string, least int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		// Some exports write counts as 2.0.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1e9 {
			return 0, fmt.Errorf("%s %q is not a whole number", name, s)
		}
		v = int(f)
	}
	if v < least || v > 1_000_000 {
		return 0, fmt.Errorf("%s %d is out of range (%d to 1000000)", name, v, least)
	}
	return v, nil
}

// sort orders the jobs by submission time, keeping the file order of ties.
func (t *Trace) sort() {
	slices.SortStableFunc(t.Jobs, func(a, b Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
}

// NodesOf is the instance count of a job on a VM size with gpusPerNode GPUs:
// the nodes column when given, else ceil(gpus / gpusPerNode) when the job
// names GPUs, else 1.
func NodesOf(j Job, gpusPerNode int) int {
	switch {
	case j.Nodes > 0:
		return j.Nodes
	case j.GPUs > 0 && gpusPerNode > 0:
		return (j.GPUs + gpusPerNode - 1) / gpusPerNode
	}
	return 1
}

// Filter returns the jobs of one virtual cluster.
func (t *Trace) Filter(vc string) *Trace {
	out := *t
	out.Jobs = nil
	for _, j := range t.Jobs {
		if j.VC == vc {
			out.Jobs = append(out.Jobs, j)
		}
	}
	return &out
}

// Until returns the jobs submitted before d.
func (t *Trace) Until(d time.Duration) *Trace {
	out := *t
	i, _ := slices.BinarySearchFunc(t.Jobs, d, func(j Job, d time.Duration) int { return cmp.Compare(j.Submit, d) })
	out.Jobs = t.Jobs[:i]
	return &out
}

// Span is the time from the trace's start to its last submission.
func (t *Trace) Span() time.Duration {
	if len(t.Jobs) == 0 {
		return 0
	}
	return t.Jobs[len(t.Jobs)-1].Submit
}

// VCs returns the distinct vc values in order of first submission.
func (t *Trace) VCs() []string {
	seen := map[string]bool{}
	var out []string
	for _, j := range t.Jobs {
		if !seen[j.VC] {
			seen[j.VC] = true
			out = append(out, j.VC)
		}
	}
	return out
}

// WriteCSV writes the trace in the format ReadTrace reads, with the
// optional columns the trace has.
func (t *Trace) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{colSubmit, colDuration}
	if t.HasNodes {
		head = append(head, colNodes)
	}
	if t.HasGPUs {
		head = append(head, colGPUs)
	}
	if t.HasVC {
		head = append(head, colVC)
	}
	if t.HasStatus {
		head = append(head, colStatus)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	row := make([]string, 0, len(head))
	for _, j := range t.Jobs {
		row = append(row[:0], secondsText(j.Submit), secondsText(j.Duration))
		if t.HasNodes {
			row = append(row, strconv.Itoa(j.Nodes))
		}
		if t.HasGPUs {
			row = append(row, strconv.Itoa(j.GPUs))
		}
		if t.HasVC {
			row = append(row, j.VC)
		}
		if t.HasStatus {
			row = append(row, j.Status)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func secondsText(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
