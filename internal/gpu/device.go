package gpu

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// ID names a device on its machine as NVIDIA's container toolkit does: a
// whole GPU by its index ("2"), a MIG instance by its GPU's index and its
// device number ("2:1"). Allocations are recorded by ID.
func ID(d agentapi.GPU) string {
	if d.MIG != "" {
		return strconv.Itoa(d.Index) + ":" + strconv.Itoa(d.MIGDevice)
	}
	return strconv.Itoa(d.Index)
}

// Visible is how CUDA_VISIBLE_DEVICES names the device for a process on
// its machine: a whole GPU by its index, a MIG instance by its UUID (CUDA
// takes no other name for one).
func Visible(d agentapi.GPU) string {
	if d.MIG != "" && d.UUID != "" {
		return d.UUID
	}
	return strconv.Itoa(d.Index)
}

// Stable is the name of the device that stays the same across machine
// boundaries (inside a container or pod its index may be another): its
// UUID, else its ID.
func Stable(d agentapi.GPU) string {
	if d.UUID != "" {
		return d.UUID
	}
	return ID(d)
}

// Names reports whether name is one of the device's names: its ID, its
// index (a whole GPU) or its UUID (any case).
func Names(d agentapi.GPU, name string) bool {
	name = strings.TrimSpace(name)
	return name != "" && (name == ID(d) || (d.UUID != "" && strings.EqualFold(name, d.UUID)))
}

// Describe is a device for people: "0 (NVIDIA H100 80GB HBM3)", or
// "0:1 (MIG 1g.10gb of NVIDIA A100-SXM4-80GB)".
func Describe(d agentapi.GPU) string {
	if d.MIG != "" {
		return ID(d) + " (MIG " + d.MIG + " of " + d.Name + ")"
	}
	return ID(d) + " (" + d.Name + ")"
}

// IDs are the devices' IDs, in order.
func IDs(ds []agentapi.GPU) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = ID(d)
	}
	return out
}

// ModelMatches reports whether a device's name is of a size's GPU model:
// the model ("V100", "A100", "H100", "T4") is one of the words of the
// name, any case ("Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB"). An
// empty model matches any device.
func ModelMatches(model, name string) bool {
	if model == "" {
		return true
	}
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if strings.EqualFold(w, model) {
			return true
		}
	}
	return false
}
