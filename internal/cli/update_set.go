package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// setPaths applies az's --set KEY.PATH=VALUE assignments to v, a YAML
// entity (ComputeSpec, jobEdit): v is written out as YAML, each value
// (read as YAML: 4 is a number, true a bool, {a: 1} a mapping) is put at
// its dotted path (a number indexes a list), and the result is read back
// refusing unknown keys, so a mistyped key says which one was meant.
func setPaths[T any](v T, sets []string, allowed map[string]string) (T, error) {
	var zero T
	b, err := yaml.Marshal(v)
	if err != nil {
		return zero, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return zero, err
	}
	if doc == nil {
		doc = map[string]any{}
	}
	keys := keysOf(reflect.TypeFor[T]())
	top := keys.keys[reflect.TypeFor[T]().String()]
	for _, s := range sets {
		path, raw, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			return zero, fmt.Errorf("--set %q is not KEY=VALUE (e.g. --set max_instances=4, --set tags.team=ml)", s)
		}
		segs := strings.Split(path, ".")
		if why, refused := allowed[segs[0]]; refused {
			return zero, fmt.Errorf("--set %s: %s", path, why)
		}
		if !slices.Contains(top, segs[0]) {
			msg := fmt.Sprintf("--set %s: unknown key %s", path, segs[0])
			if c := closest(segs[0], top); c != "" {
				msg += "; did you mean " + c + "?"
			}
			return zero, fmt.Errorf("%s", msg)
		}
		var val any
		if err := yaml.Unmarshal([]byte(raw), &val); err != nil {
			return zero, fmt.Errorf("--set %s: value %q: %w", path, raw, err)
		}
		if raw == "" {
			val = ""
		}
		if err := putPath(doc, segs, val); err != nil {
			return zero, fmt.Errorf("--set %s: %w", path, err)
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return zero, err
	}
	var next T
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&next); err != nil {
		return zero, fmt.Errorf("--set: %w", keys.explain("--set", out, err))
	}
	return next, nil
}

// putPath sets val at segs in a YAML document of maps and lists, making
// maps on the way.
func putPath(node map[string]any, segs []string, val any) error {
	key := segs[0]
	if len(segs) == 1 {
		node[key] = val
		return nil
	}
	switch next := node[key].(type) {
	case map[string]any:
		return putPath(next, segs[1:], val)
	case []any:
		i, err := strconv.Atoi(segs[1])
		if err != nil || i < 0 || i >= len(next) {
			return fmt.Errorf("%s is a list of %d: index it with 0 to %d", key, len(next), len(next)-1)
		}
		if len(segs) == 2 {
			next[i] = val
			return nil
		}
		m, ok := next[i].(map[string]any)
		if !ok {
			return fmt.Errorf("%s.%d is not a mapping", key, i)
		}
		return putPath(m, segs[2:], val)
	case nil:
		m := map[string]any{}
		node[key] = m
		return putPath(m, segs[1:], val)
	default:
		return fmt.Errorf("%s is a value, not a mapping", key)
	}
}

// computeSetRefused are the compute's keys --set cannot change, and why.
var computeSetRefused = map[string]string{
	"name":                      "the name cannot change",
	"type":                      "the type cannot change",
	"size":                      "the size cannot change on an existing compute; create another compute with it, send jobs there and delete this one",
	"tier":                      "the tier cannot change on an existing compute; create another compute with it",
	"location":                  "the location cannot change on an existing compute",
	"network_settings":          "the network cannot change on an existing compute",
	"identity":                  "use --identity-type and --user-assigned-identities",
	"ssh_settings":              "the admin account is set when the compute is created",
	"ssh_public_access_enabled": "set when the compute is created",
	"enable_node_public_ip":     "set when the compute is created",
	"kubernetes":                "set when the compute is created",
	"resource_id":               "Cumulus does not attach existing resources",
}

// jobEdit is what can change on a submitted job (az ml job update).
type jobEdit struct {
	DisplayName string            `yaml:"display_name,omitempty"`
	Description string            `yaml:"description,omitempty"`
	Tags        map[string]string `yaml:"tags,omitempty"`
}

// jobSetRefused are the job keys --set names that cannot change.
var jobSetRefused = map[string]string{}

func init() {
	for _, k := range []string{"command", "code", "environment", "compute", "resources", "distribution", "environment_variables",
		"limits", "inputs", "outputs", "experiment_name", "name", "type", "priority"} {
		jobSetRefused[k] = "only display_name, description and tags change on a submitted job; submit a new job for the rest"
	}
}

func newJobUpdateCmd(g *globals) *cobra.Command {
	var name, display, description string
	var tags, sets []string
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Change a job's display name, description or tags",
		Example: `  cumulus job update -n calm_river_3f9k2 --display-name "lr 0.01" --tags best=yes
  cumulus job update -n calm_river_3f9k2 --set description="the good one" --set tags.stage=prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := cmd.Flags().Changed
			if !set("display-name") && !set("description") && !set("tags") && !set("set") {
				return fmt.Errorf("nothing to update: give --display-name, --description, --tags or --set")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			j, err := c.GetJob(ctx, name)
			if err != nil {
				return err
			}
			p := &j.Properties
			e := jobEdit{DisplayName: p.DisplayName, Description: p.Description, Tags: p.Tags}
			if set("display-name") {
				e.DisplayName = display
			}
			if set("description") {
				e.Description = description
			}
			if set("tags") {
				e.Tags = parseTags(tags)
			}
			if e, err = setPaths(e, sets, jobSetRefused); err != nil {
				return err
			}
			p.DisplayName, p.Description, p.Tags = e.DisplayName, e.Description, e.Tags
			out, err := c.PutJob(ctx, j)
			if err != nil {
				return err
			}
			return g.showJob(c, out)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "job name")
	fl.StringVar(&display, "display-name", "", "new display name")
	fl.StringVar(&description, "description", "", "new description")
	fl.StringArrayVar(&tags, "tags", nil, "replace the tags with these key=value pairs")
	fl.StringArrayVar(&sets, "set", nil, "KEY=VALUE on the job's YAML keys, as az's --set: display_name, description, tags.KEY (repeatable)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newJobValidateCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a job YAML file without submitting it",
		Long: `Read a job file as 'job create' does and report what is wrong: unknown keys,
values of the wrong kind, a missing compute, code or input folders that do not
exist; keys that are accepted but not acted on are warnings. With a server
configured, the compute is also looked up. Nothing is uploaded or submitted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := loadYAML[JobSpec](file)
			if err != nil {
				return err
			}
			warn(g, file, spec.ignored())
			if _, err := spec.toARM(cmd.Context(), nil, filepath.Dir(file)); err != nil {
				return fmt.Errorf("%s: %w", filepath.Base(file), err)
			}
			if c, err := g.client(); err == nil {
				for _, compute := range spec.computes() {
					if _, err := c.GetCompute(cmd.Context(), compute); err != nil {
						return fmt.Errorf("%s: compute %s: %s", filepath.Base(file), compute, oneLine(err))
					}
				}
			}
			fmt.Fprintf(g.stderr, "%s is a valid job\n", filepath.Base(file))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file in the az ml command, sweep or pipeline job schema")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func newComputeValidateCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a compute YAML file without creating anything",
		Long: `Read a compute file as 'compute create' does and report what is wrong: unknown
keys, values of the wrong kind, an unknown tier or idle policy; keys that are
accepted but not acted on are warnings. With a server configured, the size is
also checked against 'compute list-sizes' and an existing compute of that name
is reported (create would update it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := loadYAML[ComputeSpec](file)
			if err != nil {
				return err
			}
			warn(g, file, spec.ignored())
			base := filepath.Base(file)
			if _, err := spec.toARM(api.Scope{Subscription: "local", ResourceGroup: "local", Workspace: "default"}); err != nil {
				return fmt.Errorf("%s: %w", base, err)
			}
			if c, err := g.client(); err == nil {
				if spec.Size != "" {
					sizes, err := c.ListSizes(cmd.Context(), spec.Location)
					if err != nil {
						return err
					}
					var names []string
					for _, s := range sizes {
						if strings.EqualFold(s.Name, spec.Size) {
							names = nil
							break
						}
						names = append(names, s.Name)
					}
					if names != nil {
						msg := fmt.Sprintf("%s: size %s is not a VM size here", base, spec.Size)
						if s := closest(spec.Size, names); s != "" {
							msg += "; did you mean " + s + "?"
						}
						return fmt.Errorf("%s (see 'cumulus compute list-sizes')", msg)
					}
				}
				if _, err := c.GetCompute(cmd.Context(), spec.Name); err == nil {
					fmt.Fprintf(g.stderr, "compute %s exists: 'compute create' would update it, 'compute apply --dry-run' shows how\n", spec.Name)
				}
			}
			fmt.Fprintf(g.stderr, "%s is a valid compute\n", base)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file in the az ml amlcompute schema")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
