package kubernetes

import (
	"strings"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// typed sorts the API server's refusal to create a node's objects: a
// resource quota of the namespace spent is a want of capacity (it frees as
// other pods end), and a quota whose usage is not counted yet is worth
// trying again; a refusal that repeats until someone changes a setting
// — an invalid pod (its placement), a namespace that does not exist, a
// permission this identity lacks, an admission policy — is a configuration
// error. Anything else (a timeout, the API server unreachable, a conflict)
// stays as it is: worth trying again.
func typed(err error) error {
	if err == nil {
		return nil
	}
	reason, _ := reasonOf(err)
	forbidden := reason == "Forbidden"
	switch {
	case forbidden && strings.Contains(err.Error(), "exceeded quota"):
		return provider.NewInsufficientCapacityError(err)
	case forbidden && strings.Contains(err.Error(), "status unknown for quota"):
		return err
	case forbidden, reason == "Invalid", reason == "BadRequest", reason == "Unauthorized", isNotFound(err):
		return provider.NewConfigurationError(err)
	}
	return err
}
