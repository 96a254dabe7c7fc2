package cli

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/suggest"
)

// yamlKeys knows, for every struct type reachable from a YAML schema type,
// its keys and where in the file it sits (resources, ssh_settings, …), so
// that yaml.v3's "field x not found in type cli.JobResourcesSpec" can be
// said in the file's own words.
type yamlKeys struct {
	keys  map[string][]string // Go type name (cli.ComputeSpec) → its keys
	where map[string]string   // Go type name → the key path that holds it ("" at the top)
}

var yamlNodeType = reflect.TypeFor[yaml.Node]()

func keysOf(t reflect.Type) yamlKeys {
	k := yamlKeys{keys: map[string][]string{}, where: map[string]string{}}
	k.walk(t, "")
	return k
}

func (k yamlKeys) walk(t reflect.Type, at string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == yamlNodeType {
		return
	}
	name := t.String()
	if _, seen := k.keys[name]; seen {
		return
	}
	k.keys[name] = nil
	k.where[name] = at
	k.fields(name, t, at)
}

func (k yamlKeys) fields(name string, t reflect.Type, at string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			k.fields(name, ft, at)
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		k.keys[name] = append(k.keys[name], tag)
		sub := tag
		if at != "" {
			sub = at + "." + tag
		}
		k.walk(f.Type, sub)
	}
}

// yaml.v3's messages, compiled when an error is explained (not at every
// start of the binary).
var (
	unknownField = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	})
	cannotDecode = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
	})
)

// explain rewrites yaml.v3's errors for file in the schema's words: an
// unknown key with the key it is likely a typo of, a value of the wrong
// kind with the kind wanted, and no Go type names.
func (k yamlKeys) explain(file string, content []byte, err error) error {
	base := file // as the user gave it
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		return fmt.Errorf("%s: %s", file, msg)
	}
	var out []string
	for _, e := range te.Errors {
		if m := unknownField().FindStringSubmatch(e); m != nil {
			line, key, typ := m[1], m[2], m[3]
			where := ""
			if at := k.where[typ]; at != "" {
				where = " under " + at
			}
			msg := fmt.Sprintf("unknown key %s%s in %s line %s", key, where, base, line)
			if s := closest(key, k.keys[typ]); s != "" {
				msg += "; did you mean " + s + "?"
			} else if known := k.keys[typ]; len(known) > 0 {
				msg += " (keys here: " + strings.Join(known, ", ") + ")"
			}
			out = append(out, msg)
			continue
		}
		if m := cannotDecode().FindStringSubmatch(e); m != nil {
			key := ""
			var doc yaml.Node
			if yaml.Unmarshal(content, &doc) == nil {
				key = keyOnLine(&doc, m[1], "")
			}
			if key != "" {
				key = " " + key
			}
			out = append(out, fmt.Sprintf("%s line %s:%s %q is not %s", base, m[1], key, m[3], kindWanted(m[4])))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", base, e))
	}
	return errors.New(strings.Join(out, "; "))
}

// keyOnLine is the path of the key whose scalar value is on line.
func keyOnLine(n *yaml.Node, line, at string) string {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			sub := at
			if n.Kind == yaml.SequenceNode {
				sub = fmt.Sprintf("%s[%d]", at, i)
			}
			if k := keyOnLine(c, line, sub); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			sub := key.Value
			if at != "" {
				sub = at + "." + key.Value
			}
			if val.Kind == yaml.ScalarNode && fmt.Sprint(val.Line) == line {
				return sub
			}
			if k := keyOnLine(val, line, sub); k != "" {
				return k
			}
		}
	}
	return ""
}

// kindWanted names, for a user, what a Go type holds.
func kindWanted(goType string) string {
	t := strings.TrimLeft(goType, "*[]")
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."), strings.HasPrefix(t, "struct"):
		return "a mapping (key: value lines)"
	}
	return "of the kind wanted here"
}

// closest is the known key nearest to key, if it is near enough to be a
// typo of it (at most two edits, or one being the other plus a suffix).
func closest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		d := suggest.Distance(strings.ToLower(key), strings.ToLower(k))
		if d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		for _, k := range known {
			if strings.HasPrefix(k, key) || strings.HasPrefix(key, k) {
				return k
			}
		}
	}
	return best
}

var apiPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\bproperties\.[A-Za-z0-9_.\[\]]*[A-Za-z0-9\]]`)
})

// apiPathKeys are the REST paths whose YAML key is not the path's tail in
// snake_case.
var apiPathKeys = map[string]string{
	"properties.properties.vmSize":                                    "size",
	"properties.properties.vmPriority":                                "tier",
	"properties.properties.scaleSettings.minNodeCount":                "min_instances",
	"properties.properties.scaleSettings.maxNodeCount":                "max_instances",
	"properties.properties.scaleSettings.nodeIdleTimeBeforeScaleDown": "idle_time_before_scale_down",
	"properties.properties.scaleSettings":                             "min_instances/max_instances",
	"properties.properties.userAccountCredentials":                    "ssh_settings",
	"properties.properties.remoteLoginPortPublicAccess":               "ssh_public_access_enabled",
	"properties.properties.subnet.id":                                 "network_settings.subnet",
	"properties.properties.subnet":                                    "network_settings.subnet",
	"properties.properties.isolatedNetwork":                           "network_settings",
	"properties.computeLocation":                                      "location",
	"properties.computeId":                                            "compute",
	"properties.environmentId":                                        "environment",
	"properties.codeId":                                               "code",
}

// yamlWords says the REST paths of an API error's message in the YAML's
// keys: properties.properties.vmSize is size, properties.limits.maxCost
// limits.max_cost.
func yamlWords(msg string) string {
	return apiPath().ReplaceAllStringFunc(msg, func(p string) string {
		if k, ok := apiPathKeys[p]; ok {
			return k
		}
		for prefix, k := range apiPathKeys {
			if strings.HasPrefix(p, prefix+".") {
				return k + "." + snake(strings.TrimPrefix(p, prefix+"."))
			}
		}
		rest := strings.TrimPrefix(strings.TrimPrefix(p, "properties."), "properties.")
		return snake(rest)
	})
}

// snake turns camelCase into snake_case.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 && s[i-1] != '.' {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
