package nodeimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/testbin"
)

func TestParseLdd(t *testing.T) {
	out := []byte(`	linux-vdso.so.1 (0x00007ffd2b3f1000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f6d1a000000)
	libpthread.so.0 => /lib/x86_64-linux-gnu/libpthread.so.0 (0x00007f6d19e00000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f6d1a3f0000)
`)
	got, err := parseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib64/ld-linux-x86-64.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseLdd = %q; want %q", got, want)
	}
	if _, err := parseLdd([]byte("\tlibfoo.so.1 => not found\n")); err == nil {
		t.Error("a missing library is not an error")
	}
}

func TestBuildRefusesADynamicBinary(t *testing.T) {
	dyn := dynamicBinary(t)
	err := BuildWith(context.Background(), Options{Tag: "cumulus-node:never", Binary: dyn})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("Build from dynamic %s = %v; want how to build a static binary", dyn, err)
	}
}

// dynamicBinary is a dynamically linked executable of this machine.
func dynamicBinary(t *testing.T) string {
	for _, p := range []string{"/bin/ls", "/usr/bin/env", "/bin/sh"} {
		if static, err := isStatic(p); err == nil && !static {
			return p
		}
	}
	t.Skip("no dynamically linked executable found here")
	return ""
}

// requireDocker skips without a Docker engine, except in CI.
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker is required in CI: %v: %s", err, out)
		}
		t.Skipf("skipping: no usable Docker engine here: %v: %s", err, bytes.TrimSpace(out))
	}
}

// TestBuild builds the image with a dynamically linked docker CLI when
// there is one (the harder case: its loader and libraries go along), twice,
// and checks what Inspect and Exists say. Build itself checks that the
// binary and the docker CLI run inside.
func TestBuild(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	const tag = "cumulus-node:nodeimage-test"
	bin := staticCumulus(t)
	cli := ""
	for _, p := range []string{"/usr/bin/docker", "/usr/local/bin/docker"} {
		if static, err := isStatic(p); err == nil && !static {
			cli = p
		}
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", tag).Run() })
	if err := BuildWith(ctx, Options{Tag: tag, Binary: bin, DockerCLI: cli}); err != nil {
		t.Fatal(err)
	}
	first, err := Inspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := FileSHA256(bin)
	if first.BinarySHA256 != sum || first.DockerCLI == "" {
		t.Errorf("Inspect = %+v; want the binary's sha256 %s and the docker CLI version", first, sum)
	}
	// A rebuild of a changed binary leaves no untagged image behind.
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0}) // still runs; another sha256
	f.Close()
	if err := Build(ctx, tag, bin, nil); err != nil {
		t.Fatal(err)
	}
	second, _ := Inspect(ctx, tag)
	if second.ID == first.ID {
		t.Error("the rebuild gave the same image")
	}
	if out, err := exec.Command("docker", "image", "inspect", first.ID).CombinedOutput(); err == nil {
		t.Errorf("the image the tag named before is left: %s", out[:min(len(out), 200)])
	}
	if ok, err := Exists(ctx, tag); !ok || err != nil {
		t.Errorf("Exists(%s) = %v, %v", tag, ok, err)
	}
	if ok, err := Exists(ctx, "cumulus-node:never-built"); ok || err != nil {
		t.Errorf("Exists of a missing image = %v, %v", ok, err)
	}
	if _, err := Inspect(ctx, "cumulus-node:never-built"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Inspect of a missing image = %v; want ErrNotFound", err)
	}
}

// staticCumulus is the static cumulus binary of the test run.
func staticCumulus(t *testing.T) string {
	t.Helper()
	bin, _, err := testbin.Cumulus(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// A build waits while another holds the engine's build lock (here until
// its context ends: it never starts docker build), and goes on once the
// lock is released.
func TestBuildWaitsForAnotherBuild(t *testing.T) {
	requireDocker(t)
	const tag = "cumulus-node:nodeimage-lock-test"
	bin := staticCumulus(t)
	t.Cleanup(func() { exec.Command("docker", "image", "rm", tag).Run() })
	release, err := lockBuilds(context.Background(), DockerSocket())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = BuildWith(ctx, Options{Tag: tag, Binary: bin})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for another build") {
		t.Fatalf("a build while another holds the lock: %v; want it waiting until its context ended", err)
	}
	if ok, _ := Exists(context.Background(), tag); ok {
		t.Fatal("the waiting build built the image")
	}
	release()
	if err := BuildWith(context.Background(), Options{Tag: tag, Binary: bin}); err != nil {
		t.Fatal(err)
	}
}
