package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// addSizes puts the sizes file's sizes into the catalogue.
func addSizes(path string, log *slog.Logger) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--sizes-file: %w", err)
	}
	sizes, err := catalog.ParseSizes(b)
	if err != nil {
		return fmt.Errorf("--sizes-file %s: %w", path, err)
	}
	if err := catalog.Add(sizes); err != nil {
		return fmt.Errorf("--sizes-file %s: %w", path, err)
	}
	log.Info("sizes of one's own hardware added to the catalogue", "file", path, "sizes", len(sizes))
	return nil
}

// readMachine reads the accelerators of the machine the provider's nodes
// share, once, as the server starts; nil for a provider whose nodes have
// machines of their own. A failing nvidia-smi leaves the machine without
// devices, saying why (GPU sizes are then refused with that reason).
func readMachine(ctx context.Context, prov provider.Provider, match gpu.Match, log *slog.Logger) *gpu.Machine {
	a, ok := prov.(provider.Accelerators)
	if !ok {
		return nil
	}
	m, err := a.Machine(ctx)
	if err != nil {
		log.Warn("the machine's GPUs cannot be read: sizes with GPUs are refused", "err", err)
		m = gpu.Machine{Why: err.Error()}
	}
	m.Match = match
	if len(m.Devices) > 0 {
		log.Info("GPUs the nodes divide", "devices", gpu.Summary(m.Devices), "model_match", string(match))
	} else if m.Why != "" {
		log.Info("no GPUs for the nodes", "why", m.Why)
	}
	return &m
}
