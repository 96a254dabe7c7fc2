package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// --query picks from what -o json prints, and -o tsv prints it one line
// per item with tab-separated values, as az does; -o none prints nothing;
// a query that does not parse is one error line.
func TestQueryAndTSV(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := mustRun(t, cfg)
	cli("compute", "create", "-n", "alpha", "--max-instances", "3")
	cli("compute", "create", "-n", "beta", "--max-instances", "5", "--tier", "low_priority")

	if got := cli("compute", "list", "--query", "[].name", "-o", "tsv"); got != "alpha\nbeta\n" {
		t.Errorf("names as tsv = %q", got)
	}
	if got := cli("compute", "list", "--query", "[].[name, max_instances, tier]", "-o", "tsv"); got != "alpha\t3\tdedicated\nbeta\t5\tlow_priority\n" {
		t.Errorf("columns as tsv = %q", got)
	}
	if got := cli("compute", "show", "-n", "beta", "--query", "max_instances"); strings.TrimSpace(got) != "5" {
		t.Errorf("one value as json = %q", got)
	}
	if got := cli("compute", "list", "--query", "[?tier=='low_priority'].{name: name, max: max_instances}", "-o", "json"); !strings.Contains(got, `"name": "beta"`) || strings.Contains(got, "alpha") {
		t.Errorf("filter = %s", got)
	}
	// A table of a query result: a column per key, sorted.
	got := cli("compute", "list", "--query", "[].{Name: name, Max: max_instances}", "-o", "table")
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 || strings.Fields(lines[0])[0] != "Max" || strings.Fields(lines[1])[1] != "alpha" {
		t.Errorf("query as table:\n%s", got)
	}
	if got := cli("compute", "show", "-n", "alpha", "-o", "none"); got != "" {
		t.Errorf("-o none printed %q", got)
	}
	if got := cli("compute", "show", "-n", "alpha", "-o", "jsonc"); !strings.Contains(got, "\x1b[") || !strings.Contains(got, "alpha") {
		t.Errorf("-o jsonc = %q", got)
	}
	_, errOut, code := run(t, "--config", cfg, "compute", "list", "--query", "[?name==")
	if code == 0 || !strings.HasPrefix(errOut, "error: --query") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("bad query: exit %d, %q", code, errOut)
	}
}

func TestTSVShapes(t *testing.T) {
	v := []any{
		map[string]any{"b": 2.5, "a": "x", "n": nil, "m": map[string]any{"k": 1.0}, "l": []any{1.0, 2.0}},
		"plain",
		true,
	}
	// keys sorted: a, b, l, m, n
	if got, want := tsv(v), "x\t2.5\t2\t\t\nplain\ntrue\n"; got != want {
		t.Errorf("tsv = %q, want %q", got, want)
	}
}

// A mistyped subcommand fails, naming the command it resembles, instead
// of printing help and exiting 0.
func TestUnknownSubcommandSuggests(t *testing.T) {
	for args, want := range map[string]string{
		"compute creat":                   "did you mean create?",
		"job lst":                         "did you mean list?",
		"comput list":                     "did you mean compute?",
		"auth tken":                       "did you mean token?",
		"compute create --max-instance 3": "unknown flag: --max-instance; did you mean --max-instances?",
		"compute creat --name x":          "did you mean create?",
		"job lst --status Running":        "did you mean list?",
		"comput list -o table":            "did you mean compute?",
	} {
		_, errOut, code := run(t, strings.Fields(args)...)
		if code == 0 || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want %q", args, code, errOut, want)
		}
	}
	if out, _, code := run(t, "compute"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("a group alone prints its help: exit %d, %q", code, out)
	}
}

// YAML errors speak of the file's keys and lines: the key a typo is likely
// of, the block it is under, the kind of value wanted; never Go types.
func TestYAMLErrorsNameKeys(t *testing.T) {
	t.Chdir(t.TempDir()) // errors name the file as it was given
	write := func(name, body string) string {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return name
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"compute", "create", "-f", write("compute.yml", "name: a\ntype: amlcompute\nsize: Standard_DS3_v2\nmin_instances: 0\nmax_instance: 2\n")},
			"unknown key max_instance in compute.yml line 5; did you mean max_instances?"},
		{[]string{"compute", "create", "-f", write("ssh.yml", "name: a\nssh_settings:\n  admin_usrname: me\n")},
			"unknown key admin_usrname under ssh_settings in ssh.yml line 3; did you mean admin_username?"},
		{[]string{"job", "create", "-f", write("job.yml", "command: true\ncompute: c\nresources: {instance_cont: 2}\n")},
			"unknown key instance_cont under resources in job.yml line 3; did you mean instance_count?"},
		{[]string{"compute", "create", "-f", write("kind.yml", "name: a\nmax_instances: lots\n")},
			`kind.yml line 2: max_instances "lots" is not a whole number`},
	}
	for _, c := range cases {
		_, errOut, code := run(t, append([]string{"--server", "http://127.0.0.1:1"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "cli.") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want %q", c.args[:2], code, errOut, c.want)
		}
	}
}

func TestYAMLWordsForAPIPaths(t *testing.T) {
	for in, want := range map[string]string{
		"properties.properties.vmSize: Standard_X is not a VM size":    "size: Standard_X is not a VM size",
		"properties.properties.scaleSettings.maxNodeCount must be ≥ 0": "max_instances must be ≥ 0",
		"properties.limits.maxCost must be positive":                   "limits.max_cost must be positive",
		"properties.properties.schedules[1].timeZone is unknown":       "schedules[1].time_zone is unknown",
		"properties.computeId names no compute":                        "compute names no compute",
	} {
		if got := yamlWords(in); got != want {
			t.Errorf("yamlWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// A shell that has not the server's CUMULUS_DATA_DIR gets told how to
// point the CLI at that server's config; serve prints the line for it.
func TestMissingConfigSaysHow(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"CUMULUS_CONFIG", "CUMULUS_DATA_DIR", "CUMULUS_SERVER", "CUMULUS_TOKEN"} {
		t.Setenv(k, "")
	}
	_, errOut, code := run(t, "compute", "list")
	if code == 0 || !strings.Contains(errOut, "no CLI config at "+home+"/.cumulus/config.yaml") ||
		!strings.Contains(errOut, "set the same CUMULUS_DATA_DIR here or pass --config DIR/config.yaml") {
		t.Errorf("exit %d, %q", code, errOut)
	}
	if h := configHint(daemon.Options{DataDir: home + "/.cumulus"}); h != "" {
		t.Errorf("default data dir: hint %q", h)
	}
	if h := configHint(daemon.Options{DataDir: "/srv/c"}); h != "The CLI config is /srv/c/config.yaml; in another shell: export CUMULUS_CONFIG=/srv/c/config.yaml" {
		t.Errorf("other data dir: hint %q", h)
	}
}
