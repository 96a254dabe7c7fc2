package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSDKEnv(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "my certs", "tls.crt")
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := "server: https://127.0.0.1:8787\ntoken: tok-123\nca_file: " + ca + "\nsubscription: sub-1\nresource_group: rg-1\nworkspace: ws-1\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CUMULUS_SERVER", "CUMULUS_TOKEN", "CUMULUS_SUBSCRIPTION", "CUMULUS_RESOURCE_GROUP", "CUMULUS_WORKSPACE"} {
		t.Setenv(k, "")
	}
	var out, errb bytes.Buffer
	if rc := Main(context.Background(), []string{"--config", cfgPath, "sdk", "env"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if strings.Contains(out.String(), "tok-123") {
		t.Error("sdk env prints the token itself; it should print the command that does")
	}
	if errb.Len() != 0 {
		t.Errorf("warning for an https server: %s", errb.String())
	}
	// What a shell makes of it, less the token line (it runs cumulus).
	var script []string
	for _, l := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(l, "export CUMULUS_TOKEN=") {
			script = append(script, l)
		}
	}
	if !strings.Contains(out.String(), `export CUMULUS_TOKEN="$(cumulus --config `) {
		t.Errorf("no token command in:\n%s", out.String())
	}
	script = append(script, `printf '%s|%s|%s|%s|%s|%s|%s\n' "$AZUREML_DEV_URL_MFE" "$CUMULUS_ENDPOINT" "$REQUESTS_CA_BUNDLE" "$NODE_EXTRA_CA_CERTS" "$SSL_CERT_FILE" "$AZURE_SUBSCRIPTION_ID/$AZURE_RESOURCE_GROUP" "$AZUREML_WORKSPACE_NAME"`)
	got, err := exec.Command("sh", "-c", strings.Join(script, "\n")).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v: %s", err, got)
	}
	want := "https://127.0.0.1:8787|https://127.0.0.1:8787|" + ca + "|" + ca + "|" + ca + "|sub-1/rg-1|ws-1\n"
	if string(got) != want {
		t.Errorf("the shell sees\n%s want\n%s", got, want)
	}

	out.Reset()
	if rc := Main(context.Background(), []string{"--config", cfgPath, "sdk", "token"}, &out, &errb); rc != 0 || out.String() != "tok-123\n" {
		t.Errorf("sdk token: rc %d %q", rc, out.String())
	}

	// An http server: no CA variables, and a warning that SDKs will refuse.
	if err := os.WriteFile(cfgPath, []byte("server: http://127.0.0.1:8787\ntoken: t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if rc := Main(context.Background(), []string{"--config", cfgPath, "sdk", "env"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d", rc)
	}
	if strings.Contains(out.String(), "REQUESTS_CA_BUNDLE") || !strings.Contains(errb.String(), "--tls-self-signed") {
		t.Errorf("http server: out %s err %s", out.String(), errb.String())
	}
}
