// Package config reads and writes the CLI's configuration file and finds
// Cumulus's directories. Every path can be overridden by flag or by a
// CUMULUS_… environment variable.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// CLI is ~/.cumulus/config.yaml: where the server is and who we are.
type CLI struct {
	Server        string `yaml:"server"` // one URL, or the replicas' URLs comma-separated
	Token         string `yaml:"token"`
	CAFile        string `yaml:"ca_file,omitempty"`
	Subscription  string `yaml:"subscription"`
	ResourceGroup string `yaml:"resource_group"`
	Workspace     string `yaml:"workspace"`
	Location      string `yaml:"location,omitempty"`
}

// DataDir is the state directory: $CUMULUS_DATA_DIR, else ~/.cumulus.
func DataDir() string {
	if d := os.Getenv("CUMULUS_DATA_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ".cumulus"
	}
	return filepath.Join(home, ".cumulus")
}

// NodesDir is where the local provider keeps its node folders (agents'
// work dirs, where jobs run) for a data dir: a sibling of it,
// <data dir>-nodes, so that a job's folder never lies inside the control
// plane's state.
func NodesDir(dataDir string) string {
	return filepath.Clean(dataDir) + "-nodes"
}

// Path is the CLI config file: $CUMULUS_CONFIG, else <data dir>/config.yaml.
func Path() string {
	if p := os.Getenv("CUMULUS_CONFIG"); p != "" {
		return p
	}
	return filepath.Join(DataDir(), "config.yaml")
}

// Load reads the CLI config; a missing file gives an empty config and
// os.ErrNotExist in the error chain.
func Load(path string) (CLI, error) {
	var c CLI
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Save writes the CLI config with owner-only permissions (it holds a token).
func Save(path string, c CLI) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a stale one would keep its mode: WriteFile sets it only when creating
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// IsMissing reports whether err means the config file does not exist.
func IsMissing(err error) bool { return errors.Is(err, os.ErrNotExist) }
