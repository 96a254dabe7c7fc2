package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jmespath/go-jmespath"
	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/lazyjson"
)

// outputFormats are the values of -o, as az's.
var outputFormats = []string{"table", "json", "jsonc", "yaml", "tsv", "none"}

// format picks the output format: the -o flag, else def.
func (g *globals) format(def string) (string, error) {
	f := g.output
	if f == "" {
		f = def
	}
	for _, v := range outputFormats {
		if f == v {
			return f, nil
		}
	}
	return "", fmt.Errorf("--output %q is not one of %s", f, strings.Join(outputFormats, ", "))
}

// generic turns v into what encoding/json decodes JSON into (maps, slices,
// float64, string, bool, nil): the shape --query and the generic renderers
// work on, with the JSON key names.
func generic(v any) (any, error) {
	b, err := lazyjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	return out, nil
}

// query applies the --query JMESPath expression, as az does, to what
// -o json would print.
func (g *globals) query(v any) (any, error) {
	x, err := generic(v)
	if err != nil {
		return nil, err
	}
	out, err := jmespath.Search(g.queryExpr, x)
	if err != nil {
		return nil, fmt.Errorf("--query %q: %s", g.queryExpr, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return out, nil
}

// printValue prints v in a format other than table (after --query, when
// given): JSON, colored JSON, YAML with JSON's key names, tab-separated
// values, or nothing.
func (g *globals) printValue(format string, v any) error {
	if g.queryExpr != "" {
		q, err := g.query(v)
		if err != nil {
			return err
		}
		v = q
	}
	return printValue(g.stdout, format, v)
}

func printValue(w io.Writer, format string, v any) error {
	switch format {
	case "none":
		return nil
	case "tsv":
		x, err := generic(v)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, tsv(x))
		return err
	case "table":
		x, err := generic(v)
		if err != nil {
			return err
		}
		return genericTable(x).print(w)
	}
	b, err := lazyjson.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	switch format {
	case "json":
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "jsonc":
		_, err = fmt.Fprintln(w, colorJSON(b))
		return err
	}
	x, err := generic(v)
	if err != nil {
		return err
	}
	y, err := yaml.Marshal(x)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = w.Write(y)
	return err
}

// tsv renders a value as az's -o tsv does: a list is one line per item;
// an object is its values, tab-separated, in the order of its keys; a
// nested object is an empty cell and a nested list the number of its
// items; null is an empty cell.
func tsv(v any) string {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	var b strings.Builder
	for _, it := range items {
		var cells []string
		switch x := it.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				cells = append(cells, tsvCell(x[k]))
			}
		case []any:
			for _, e := range x {
				cells = append(cells, tsvCell(e))
			}
		default:
			cells = []string{tsvCell(x)}
		}
		b.WriteString(strings.Join(cells, "\t"))
		b.WriteByte('\n')
	}
	return b.String()
}

func tsvCell(v any) string {
	switch x := v.(type) {
	case nil, map[string]any:
		return ""
	case []any:
		return strconv.Itoa(len(x))
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// genericTable renders a --query result as a table: a list of objects
// has a column per key (nested values left out, as az does), a list of
// scalars one Result column, an object one row, a scalar itself.
func genericTable(v any) *table {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	cols := map[string]bool{}
	objects := true
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			objects = false
			break
		}
		for k, x := range m {
			switch x.(type) {
			case map[string]any, []any:
			default:
				cols[k] = true
			}
		}
	}
	if !objects || len(items) == 0 {
		t := &table{header: []string{"Result"}}
		for _, it := range items {
			t.add(tsvCell(it))
		}
		return t
	}
	keys := make([]string, 0, len(cols))
	for k := range cols {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := &table{header: keys}
	for _, it := range items {
		m := it.(map[string]any)
		row := make([]any, len(keys))
		for i, k := range keys {
			row[i] = tsvCell(m[k])
		}
		t.add(row...)
	}
	return t
}

// colorJSON colors indented JSON for a terminal as az's jsonc does: keys
// blue, strings green, numbers, booleans and null cyan.
func colorJSON(b []byte) string {
	const (
		key   = "\x1b[94m"
		str   = "\x1b[32m"
		lit   = "\x1b[36m"
		reset = "\x1b[0m"
	)
	var out strings.Builder
	i := 0
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			j++ // past the closing quote
			rest := bytes.TrimLeft(b[j:], " ")
			color := str
			if len(rest) > 0 && rest[0] == ':' {
				color = key
			}
			out.WriteString(color)
			out.Write(b[i:j])
			out.WriteString(reset)
			i = j
		case c == '-' || c == 't' || c == 'f' || c == 'n' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && !strings.ContainsRune(",]}\n ", rune(b[j])) {
				j++
			}
			out.WriteString(lit)
			out.Write(b[i:j])
			out.WriteString(reset)
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// table is rows under a header, printed aligned.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

func (t *table) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// show prints v in the chosen format; in table format, tbl renders it,
// unless --query picked something else from v to print.
func (g *globals) show(def string, v any, tbl func() *table) error {
	f, err := g.format(def)
	if err != nil {
		return err
	}
	if f == "table" && g.queryExpr == "" {
		return tbl().print(g.stdout)
	}
	return g.printValue(f, v)
}
