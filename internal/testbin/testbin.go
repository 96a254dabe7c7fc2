// Package testbin gives tests the static cumulus binary they run as a
// server, an agent or a node image's entry point.
//
// scripts/test.sh builds the binary once per run and names it in
// CUMULUS_TEST_BINARY, so test packages that run in parallel do not each
// build their own. A package run alone (go test ./internal/provider/docker/)
// builds it here instead, with no deadline: on a cold build cache that takes
// minutes, and killing it helps nobody.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Env names the prebuilt binary.
const Env = "CUMULUS_TEST_BINARY"

// Cumulus returns the path of a static cumulus binary: the one named by
// CUMULUS_TEST_BINARY, or one built into dir. built says whether it was
// built here (the caller removes dir as usual).
func Cumulus(dir string) (path string, built bool, err error) {
	if p := os.Getenv(Env); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			return "", false, fmt.Errorf("%s=%s: %w", Env, p, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", false, fmt.Errorf("%s=%s is not an executable file", Env, p)
		}
		return p, false, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", false, err
	}
	path = filepath.Join(dir, "cumulus")
	if err := Build(root, path); err != nil {
		return "", false, err
	}
	return path, true, nil
}

// Build builds a static cumulus (CGO_ENABLED=0: it also goes into node
// images) from the module at root into out.
func Build(root, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/cumulus")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build cumulus: %w\n%s", err, b)
	}
	return nil
}

// ModuleRoot is the directory of the cumulus module's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the cumulus module")
	}
	return filepath.Dir(mod), nil
}
