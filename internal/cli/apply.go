package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// Declarative apply: make the server's computes, environments and budgets
// match YAML files, showing what changes, creating what is missing and
// changing nothing when they already match (so applying twice is a no-op).

// applied is what applying one resource did (or, on a dry run, would do).
type applied struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Action  string   `json:"action"` // created, updated, unchanged (or "would create", "would update")
	Changes []string `json:"changes,omitempty"`
}

func newComputeApplyCmd(g *globals) *cobra.Command {
	var file string
	var dryRun, noWait bool
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Create a compute cluster or update it to match a YAML file, showing what changes",
		Long: `Create the compute the file describes if it does not exist; otherwise change its
description, tags, instances, idle time, idle policy and schedules to the file's
(schedules the file leaves out are removed) and print each change. A compute
that already matches is left alone. Size, tier, location and network cannot
change on an existing compute: delete it and create it again.`,
		Example: `  cumulus compute apply --file compute.yml --dry-run
  cumulus compute apply --file compute.yml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := loadYAML[ComputeSpec](file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := applyCompute(cmd.Context(), g, c, spec, dryRun, noWait)
			if err != nil {
				return err
			}
			return g.showApplied([]applied{res})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file in the az ml amlcompute schema")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would change and change nothing")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for a new compute to be created")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// applyCompute makes one compute match spec.
func applyCompute(ctx context.Context, g *globals, c *client.Client, spec ComputeSpec, dryRun, noWait bool) (applied, error) {
	want, err := spec.toARM(c.Scope)
	if err != nil {
		return applied{}, err
	}
	res := applied{Kind: "compute", Name: want.Name}
	_, written, err := c.EditCompute(ctx, want.Name, func(cur api.Compute) (api.Compute, bool, error) {
		if err := immutableCompute(cur, want); err != nil {
			return cur, false, err
		}
		var next api.Compute
		if err := roundTrip(cur, &next); err != nil { // a copy the edits cannot share with cur
			return cur, false, err
		}
		if err := spec.applyUpdate(&next); err != nil {
			return cur, false, err
		}
		res.Changes = flatDiff(fromARM(cur).ComputeSpec, fromARM(next).ComputeSpec)
		return next, len(res.Changes) > 0 && !dryRun, nil
	})
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		res.Changes = flatDiff(nil, fromARM(want).ComputeSpec)
		if dryRun {
			res.Action = "would create"
			return res, nil
		}
		_, resp, err := c.PutCompute(ctx, want)
		if err != nil {
			return res, err
		}
		if !noWait {
			if err := waitWithProgress(ctx, g, c, resp, "Creating compute "+want.Name); err != nil {
				return res, err
			}
		}
		res.Action = "created"
		return res, nil
	case err != nil:
		return res, err
	case written:
		res.Action = "updated"
	case len(res.Changes) == 0:
		res.Action = "unchanged"
	default:
		res.Action = "would update"
	}
	return res, nil
}

// immutableCompute refuses a file that changes what an existing compute
// keeps for life (what the file leaves out keeps the compute's).
func immutableCompute(cur, want api.Compute) error {
	ca, wa := cur.Aml(), want.Aml()
	var diffs []string
	if wa.VMSize != "" && !strings.EqualFold(ca.VMSize, wa.VMSize) {
		diffs = append(diffs, fmt.Sprintf("size %s → %s", ca.VMSize, wa.VMSize))
	}
	if wa.VMPriority != "" && ca.VMPriority != wa.VMPriority {
		diffs = append(diffs, fmt.Sprintf("tier %s → %s", ca.VMPriority, wa.VMPriority))
	}
	if wl := want.Properties.ComputeLocation; wl != "" && !strings.EqualFold(wl, cur.Properties.ComputeLocation) {
		diffs = append(diffs, fmt.Sprintf("location %s → %s", cur.Properties.ComputeLocation, wl))
	}
	if (wa.Subnet != nil) != (ca.Subnet != nil) || (wa.Subnet != nil && !strings.EqualFold(wa.Subnet.ID, ca.Subnet.ID)) {
		diffs = append(diffs, "network_settings")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("compute %s cannot change %s: delete it and create it again", cur.Name, strings.Join(diffs, ", "))
	}
	return nil
}

// roundTrip copies v into out through JSON.
func roundTrip(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// flatDiff lists the differences between two values as "key: old → new",
// "+ key: new" and "- key: old", with nested keys joined by dots.
func flatDiff(before, after any) []string {
	flat := func(v any) map[string]string {
		out := map[string]string{}
		if v == nil {
			return out
		}
		var m any
		if roundTrip(v, &m) != nil {
			return out
		}
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					walk(strings.TrimPrefix(prefix+"."+k, "."), e)
				}
			case []any:
				for i, e := range x {
					walk(fmt.Sprintf("%s[%d]", prefix, i), e)
				}
			case nil:
			default:
				b, _ := json.Marshal(x)
				out[prefix] = string(b)
			}
		}
		walk("", m)
		return out
	}
	a, b := flat(before), flat(after)
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		old, had := a[k]
		now, has := b[k]
		switch {
		case had && has && old != now:
			out = append(out, fmt.Sprintf("%s: %s → %s", k, old, now))
		case has && !had:
			out = append(out, fmt.Sprintf("+ %s: %s", k, now))
		case had && !has:
			out = append(out, fmt.Sprintf("- %s: %s", k, old))
		}
	}
	return out
}

// showApplied prints what was applied: a line per resource and its
// changes (table), or the list (json, yaml).
func (g *globals) showApplied(rs []applied) error {
	return g.show("table", rs, func() *table {
		t := &table{header: []string{"KIND", "NAME", "ACTION", "CHANGES"}}
		for _, r := range rs {
			first := "-"
			if len(r.Changes) > 0 {
				first = r.Changes[0]
			}
			t.add(r.Kind, r.Name, r.Action, first)
			for _, ch := range r.Changes[min(1, len(r.Changes)):] {
				t.add("", "", "", ch)
			}
		}
		return t
	})
}

// BudgetSpec is a budget in YAML (a Cumulus resource): type budget.
type BudgetSpec struct {
	Schema     string     `yaml:"$schema,omitempty"`
	Type       string     `yaml:"type"`
	Name       string     `yaml:"name"`
	Amount     float64    `yaml:"amount"`
	Period     string     `yaml:"period,omitempty"`
	Compute    string     `yaml:"compute,omitempty"`
	Tag        *BudgetTag `yaml:"tag,omitempty"`
	Thresholds []float64  `yaml:"thresholds,omitempty"`
	Action     string     `yaml:"action,omitempty"`
	Webhook    string     `yaml:"webhook,omitempty"`
}

// BudgetTag is a budget's tag scope in YAML.
type BudgetTag struct {
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
}

// EnvironmentSpec is an environment version in the az ml YAML.
type EnvironmentSpec struct {
	Schema      string `yaml:"$schema,omitempty"`
	Type        string `yaml:"type,omitempty"`
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	Image       string `yaml:"image"`
	Description string `yaml:"description,omitempty"`
}

func newApplyCmd(g *globals) *cobra.Command {
	var path string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Make the workspace's computes, environments and budgets match the YAML files of a folder",
		Long: `Apply every .yml/.yaml file of a folder (or one file), in name order: computes
(type: amlcompute, as 'compute apply'), environments (an az ml environment with
name, version and image; a version is created once and never changed) and
budgets (type: budget, with name, amount, period, compute or tag, thresholds,
action, webhook). Prints what was created, updated or left unchanged.`,
		Example: `  cumulus apply -f infra/ --dry-run
  cumulus apply -f infra/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := yamlFiles(path)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var out []applied
			for _, f := range files {
				r, err := applyFile(cmd.Context(), g, c, f, dryRun)
				if err != nil {
					_ = g.showApplied(out)
					return fmt.Errorf("%s: %w", f, err)
				}
				out = append(out, r)
			}
			return g.showApplied(out)
		},
	}
	cmd.Flags().StringVarP(&path, "file", "f", "", "a folder of YAML files, or one file")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would change and change nothing")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func yamlFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if ext := strings.ToLower(filepath.Ext(e.Name())); !e.IsDir() && (ext == ".yml" || ext == ".yaml") {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no .yml or .yaml files", path)
	}
	slices.Sort(out)
	return out, nil
}

// applyFile applies one file, by what it describes.
func applyFile(ctx context.Context, g *globals, c *client.Client, path string, dryRun bool) (applied, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return applied{}, err
	}
	var head struct {
		Schema string `yaml:"$schema"`
		Type   string `yaml:"type"`
	}
	if err := yaml.Unmarshal(b, &head); err != nil {
		return applied{}, fmt.Errorf("not YAML: %w", err)
	}
	kind := strings.ToLower(head.Type)
	schema := strings.ToLower(head.Schema)
	switch {
	case kind == "amlcompute" || strings.Contains(schema, "amlcompute"):
		spec, err := loadYAML[ComputeSpec](path)
		if err != nil {
			return applied{}, err
		}
		return applyCompute(ctx, g, c, spec, dryRun, false)
	case kind == "budget":
		spec, err := loadYAML[BudgetSpec](path)
		if err != nil {
			return applied{}, err
		}
		return applyBudget(ctx, c, spec, dryRun)
	case kind == "environment" || strings.Contains(schema, "environment"):
		spec, err := loadYAML[EnvironmentSpec](path)
		if err != nil {
			return applied{}, err
		}
		return applyEnvironment(ctx, c, spec, dryRun)
	}
	return applied{}, fmt.Errorf("type %q is not one of amlcompute, environment, budget", head.Type)
}

func applyBudget(ctx context.Context, c *client.Client, s BudgetSpec, dryRun bool) (applied, error) {
	want := api.Budget{Name: s.Name, Properties: api.BudgetProperties{Amount: s.Amount, Period: s.Period, Compute: s.Compute,
		Thresholds: s.Thresholds, Action: s.Action, Webhook: s.Webhook}}
	if s.Tag != nil {
		want.Properties.Tag = &api.BudgetTag{Key: s.Tag.Key, Value: s.Tag.Value}
	}
	if err := api.PrepareBudget(&want, s.Name); err != nil { // the server's defaults, to compare like with like
		return applied{}, err
	}
	res := applied{Kind: "budget", Name: s.Name}
	cur, err := c.GetBudget(ctx, s.Name)
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		res.Action, res.Changes = "created", flatDiff(nil, want.Properties)
	case err != nil:
		return res, err
	default:
		cur.Properties.Status = nil
		res.Changes = flatDiff(cur.Properties, want.Properties)
		res.Action = "updated"
		if len(res.Changes) == 0 {
			res.Action = "unchanged"
			return res, nil
		}
	}
	if dryRun {
		res.Action = "would " + strings.TrimSuffix(res.Action, "d")
		return res, nil
	}
	_, err = c.PutBudget(ctx, want)
	return res, err
}

func applyEnvironment(ctx context.Context, c *client.Client, s EnvironmentSpec, dryRun bool) (applied, error) {
	res := applied{Kind: "environment", Name: s.Name + ":" + s.Version}
	if s.Name == "" || s.Version == "" || s.Image == "" {
		return res, fmt.Errorf("an environment needs name, version and image")
	}
	want := api.EnvironmentProperties{Image: s.Image, Description: s.Description}
	cur, err := c.GetEnvironment(ctx, s.Name, s.Version)
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		res.Action, res.Changes = "created", flatDiff(nil, want)
	case err != nil:
		return res, err
	case cur.Properties.Image == want.Image && cur.Properties.Description == want.Description:
		res.Action = "unchanged"
		return res, nil
	default:
		return res, fmt.Errorf("environment %s version %s exists with another image or description: versions do not change; give the file a new version", s.Name, s.Version)
	}
	if dryRun {
		res.Action = "would create"
		return res, nil
	}
	_, err = c.PutEnvironment(ctx, s.Name, s.Version, api.Environment{Properties: want})
	return res, err
}
