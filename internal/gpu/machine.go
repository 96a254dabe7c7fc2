package gpu

import (
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Match is how a size's GPU model is matched against a machine's devices.
type Match string

const (
	// MatchCount (the default) counts every device, whatever its model: a
	// V100 size runs on the machine's H100s. A machine of one's own rarely
	// has the model a cloud size names.
	MatchCount Match = "count"
	// MatchStrict counts only the devices whose name has the size's model
	// (see ModelMatches); a size without a model takes any device.
	MatchStrict Match = "strict"
)

// ParseMatch reads a --gpu-model-match value ("" is MatchCount).
func ParseMatch(s string) (Match, error) {
	switch Match(strings.ToLower(s)) {
	case "", MatchCount:
		return MatchCount, nil
	case MatchStrict:
		return MatchStrict, nil
	}
	return "", fmt.Errorf("GPU model match %q is not one of count, strict", s)
}

// Machine is the accelerators of the one machine whose nodes divide them
// (the local and docker providers): every node holds its own devices.
type Machine struct {
	Devices []agentapi.GPU
	Match   Match
	// Why says why the machine offers its nodes no device although it may
	// have some (the Docker engine cannot hand GPUs to containers); "" when
	// there is nothing to add.
	Why string
}

// Fitting are the devices a node of a size with GPU model model may hold,
// in inventory order.
func (m Machine) Fitting(model string) []agentapi.GPU {
	if m.Match != MatchStrict || model == "" {
		return m.Devices
	}
	var out []agentapi.GPU
	for _, d := range m.Devices {
		if ModelMatches(model, d.Name) {
			out = append(out, d)
		}
	}
	return out
}

// CheckSize refuses a size whose node needs more GPUs than this machine
// will ever have, naming the size, the GPUs it needs and the most there
// are ("this machine has no GPU" when there are none); nil when it fits.
func (m Machine) CheckSize(size string, gpus int, model string) error {
	if gpus <= 0 {
		return nil
	}
	fit := m.Fitting(model)
	if len(fit) >= gpus {
		return nil
	}
	need := fmt.Sprintf("vmSize %s needs %d %s a node", size, gpus, plural(gpus, "GPU"))
	switch {
	case len(m.Devices) == 0 && m.Why != "":
		return fmt.Errorf("%s; this machine has no GPU its nodes can use: %s", need, m.Why)
	case len(m.Devices) == 0:
		return fmt.Errorf("%s; this machine has no GPU", need)
	case len(fit) < len(m.Devices):
		return fmt.Errorf("vmSize %s needs %d %s %s a node; this machine has %s of that model (it has %s; GPU models are matched strictly: serve --gpu-model-match count takes any)",
			size, gpus, model, plural(gpus, "GPU"), atMost(len(fit)), Summary(m.Devices))
	}
	return fmt.Errorf("%s; this machine has at most %d (%s)", need, len(fit), Summary(m.Devices))
}

func atMost(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("at most %d", n)
}

// Summary is a machine's devices for people: "4 × NVIDIA H100 80GB HBM3",
// "2 × MIG 3g.40gb of NVIDIA A100-SXM4-80GB, 1 × NVIDIA A100-SXM4-80GB".
func Summary(ds []agentapi.GPU) string {
	var names []string
	count := map[string]int{}
	for _, d := range ds {
		n := d.Name
		if d.MIG != "" {
			n = "MIG " + d.MIG + " of " + d.Name
		}
		if count[n] == 0 {
			names = append(names, n)
		}
		count[n]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d × %s", count[n], n)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
