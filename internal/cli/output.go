package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"
)

// format picks the output format: the -o flag, else def.
func (g *globals) format(def string) (string, error) {
	f := g.output
	if f == "" {
		f = def
	}
	switch f {
	case "table", "json", "yaml":
		return f, nil
	}
	return "", fmt.Errorf("--output %q is not one of table, json, yaml", f)
}

// printValue prints v as JSON or YAML (YAML keeps JSON's key names).
func printValue(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if format == "json" {
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	y, err := yaml.Marshal(generic)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = w.Write(y)
	return err
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

// show prints v in the chosen format; in table format, tbl renders it.
func (g *globals) show(def string, v any, tbl func() *table) error {
	f, err := g.format(def)
	if err != nil {
		return err
	}
	if f == "table" {
		return tbl().print(g.stdout)
	}
	return printValue(g.stdout, f, v)
}
