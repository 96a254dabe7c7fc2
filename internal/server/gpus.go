package server

import (
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
)

// checkGPUs refuses a compute whose size needs more GPUs a node than the
// machine the provider's nodes share will ever have (Config.GPUs): its
// nodes could never start. The message names the size, the GPUs it needs
// and the most there are.
func (s *Server) checkGPUs(c api.Compute) error {
	m := s.cfg.GPUs
	if m == nil {
		return nil
	}
	size, ok := catalog.Lookup(c.Aml().VMSize)
	if !ok {
		return nil // PrepareCompute said so
	}
	if err := m.CheckSize(size.Name, size.GPUs, size.GPUModel); err != nil {
		var v api.Validation
		v.Add(api.CodeValidationError, "properties.properties.vmSize", "%s; choose a size with fewer GPUs ('cumulus compute list-sizes --gpu')", err)
		return v.Err()
	}
	return nil
}
