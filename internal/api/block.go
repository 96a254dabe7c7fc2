package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/quota"
)

// BlockKind names one reason why queued jobs wait or a cluster cannot grow.
type BlockKind string

// The kinds of Block. Each names the fields of Block it uses.
const (
	// BlockTooBig: job Job (JobName) needs Need nodes, more than the
	// cluster's maxNodeCount Max: it can never run there.
	BlockTooBig BlockKind = "JobTooBig"
	// BlockAtMax: the cluster is at maxNodeCount Max, set by the schedule
	// entry Schedule ("" when it is the cluster's own).
	BlockAtMax BlockKind = "AtMaxNodes"
	// BlockQuota: quota allows Allowed more nodes, fewer than the queue
	// needs. On a job: Quota says what its nodes need.
	BlockQuota BlockKind = "Quota"
	// BlockBackoff: the provider failed to create nodes (Message, its
	// words) and is retried later; no node is created meanwhile.
	BlockBackoff BlockKind = "ProviderBackoff"
	// BlockBudget: a budget's action holds the cluster (Budget).
	BlockBudget BlockKind = "Budget"
	// BlockGPUs: a node cannot be placed now: it needs more of the
	// devices of the machine the provider's nodes share than are free
	// (GPUs). On a job: the job waits for such a node.
	BlockGPUs BlockKind = "GPUs"
	// BlockShare (fair share): jobs of group Group wait while jobs of
	// groups further below their share start first; the group holds Nodes
	// nodes now, its share is Share nodes, and it held Recent nodes on
	// average lately (its decayed usage).
	BlockShare BlockKind = "FairShare"
	// BlockQueued: Nodes of the cluster's new nodes wait in the queue of
	// the scheduler the provider hands them to (Slurm), for the reason that
	// scheduler gives (Wait).
	BlockQueued BlockKind = "ProviderQueue"
)

// Block is one reason why queued jobs wait or a cluster cannot grow: a value
// made where the decision is taken (decide, and the controller for quota and
// budget figures), stored with the compute (and on a job that waits for a
// reason of its own), and worded only here, never parsed back.
type Block struct {
	Kind BlockKind `json:"kind"`
	// Job and JobName name the job the reason is about; empty when it holds
	// every queued job.
	Job     string `json:"job,omitempty"`
	JobName string `json:"jobName,omitempty"`
	// Need is the nodes the job needs (BlockTooBig).
	Need int `json:"need,omitempty"`
	// Max is maxNodeCount in force (BlockTooBig, BlockAtMax); Schedule the
	// entry that set it ("" when it is the cluster's own).
	Max      int    `json:"max,omitempty"`
	Schedule string `json:"schedule,omitempty"`
	// Allowed is how many more nodes quota allows (BlockQuota).
	Allowed int `json:"allowed,omitempty"`
	// Quota, on a job waiting for quota, is what its nodes need.
	Quota *QuotaNeed `json:"quota,omitempty"`
	// Message is the provider's failure (BlockBackoff).
	Message string `json:"message,omitempty"`
	// Budget is the budget whose action holds the cluster (BlockBudget).
	Budget *BudgetHold `json:"budget,omitempty"`
	// GPUs is what a node needs of the machine's devices (BlockGPUs).
	GPUs *GPUNeed `json:"gpus,omitempty"`
	// Wait is the scheduler's reason (BlockQueued).
	Wait *NodeWait `json:"wait,omitempty"`
	// Group, Nodes, Share and Recent say where a fair-share group stands
	// (BlockShare); Group "" is the jobs without the grouping tag. Nodes is
	// also how many nodes wait for Wait (BlockQueued).
	Group  string  `json:"group,omitempty"`
	Nodes  int     `json:"nodes,omitempty"`
	Share  float64 `json:"share,omitempty"`
	Recent float64 `json:"recent,omitempty"`
}

// QuotaNeed is what the nodes a job waits for need of a quota, and how much
// of it is free.
type QuotaNeed struct {
	Location    string `json:"location"`
	Family      string `json:"family"`
	LowPriority bool   `json:"lowPriority,omitempty"`
	// Quota is the binding quota: the family, TotalDedicated or LowPriority.
	Quota string `json:"quota"`
	Cores int64  `json:"cores"`
	Free  int64  `json:"free"`
	Limit int64  `json:"limit"`
}

// QuotaNeedOf is the value of a quota.Need in a location.
func QuotaNeedOf(n quota.Need, location string) *QuotaNeed {
	return &QuotaNeed{Location: location, Family: n.Family, LowPriority: n.LowPriority, Quota: n.Quota, Cores: n.Cores, Free: n.Free, Limit: n.Limit}
}

func (q *QuotaNeed) need() quota.Need {
	return quota.Need{Family: q.Family, LowPriority: q.LowPriority, Quota: q.Quota, Cores: q.Cores, Free: q.Free, Limit: q.Limit}
}

// BudgetHold is a budget whose action is in force.
type BudgetHold struct {
	Name     string  `json:"name"`
	Percent  float64 `json:"percent"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Period   string  `json:"period"`
	// ToMin: the budget also scales the cluster to its minimum.
	ToMin bool `json:"toMin,omitempty"`
}

// Blocks are the reasons of one cluster.
type Blocks []Block

// Has reports whether one of the reasons is of kind k.
func (bs Blocks) Has(k BlockKind) bool {
	for _, b := range bs {
		if b.Kind == k {
			return true
		}
	}
	return false
}

// Without returns the reasons that are not of the kinds given.
func (bs Blocks) Without(kinds ...BlockKind) Blocks {
	var out Blocks
	for _, b := range bs {
		drop := false
		for _, k := range kinds {
			drop = drop || b.Kind == k
		}
		if !drop {
			out = append(out, b)
		}
	}
	return out
}

// ForCompute words the reasons for the compute's status ("at maxNodeCount
// 2, set by schedule …; quota allows 1 more node"), in the order given.
// c, when not nil, is the compute (it words the schedule in force).
func (bs Blocks) ForCompute(c *Compute) string {
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, b.forCompute(c))
	}
	return strings.Join(parts, "; ")
}

func (b Block) forCompute(c *Compute) string {
	switch b.Kind {
	case BlockTooBig:
		return fmt.Sprintf("job %s needs %d %s, more than maxNodeCount %d", b.jobName(), b.Need, plural(b.Need, "node"), b.Max) +
			scheduleWords(c, b.Schedule, ", set by ")
	case BlockAtMax:
		return fmt.Sprintf("at maxNodeCount %d", b.Max) + scheduleWords(c, b.Schedule, ", set by ")
	case BlockQuota:
		return fmt.Sprintf("quota allows %d more %s", b.Allowed, plural(b.Allowed, "node"))
	case BlockBackoff:
		return "node provisioning fails and is retried: " + b.Message
	case BlockBudget:
		return b.Budget.words()
	case BlockGPUs:
		if b.GPUs != nil {
			return b.GPUs.String()
		}
	case BlockShare:
		return b.shareWords(c)
	case BlockQueued:
		return fmt.Sprintf("%d new %s %s in %s", b.Nodes, plural(b.Nodes, "node"), verb(b.Nodes, "waits", "wait"), b.Wait.Words())
	}
	return string(b.Kind)
}

// shareWords says where a fair-share group stands.
func (b Block) shareWords(c *Compute) string {
	name := b.Group
	if c != nil {
		name = c.Queue().GroupName(b.Group)
	}
	switch {
	case float64(b.Nodes) > b.Share:
		return fmt.Sprintf("%s is over its share: %d of %s nodes", name, b.Nodes, Nodes(b.Share))
	case b.Recent > b.Share:
		return fmt.Sprintf("%s used more than its share lately: %s of %s nodes on average", name, Nodes(b.Recent), Nodes(b.Share))
	}
	return fmt.Sprintf("%s is within its share: %d of %s nodes", name, b.Nodes, Nodes(b.Share))
}

// Nodes words a number of nodes that may be fractional (a share, an
// average): whole numbers as such, others with one decimal.
func Nodes(x float64) string {
	if r := math.Round(x); math.Abs(x-r) < 0.05 {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(math.Round(x*10)/10, 'f', 1, 64)
}

// ForJob words a reason for a queued job: why it waits.
func (b Block) ForJob(c *Compute) string { return b.jobPrefix() + b.forJob(c) }

// jobPrefix begins a queued job's reason: what it waits for.
func (b Block) jobPrefix() string {
	switch b.Kind {
	case BlockQuota:
		return QuotaWaitPrefix
	case BlockBudget:
		return BudgetWaitPrefix
	case BlockGPUs:
		return GPUWaitPrefix
	}
	return NodesWaitPrefix
}

// forJob is ForJob without its prefix.
func (b Block) forJob(c *Compute) string {
	switch b.Kind {
	case BlockTooBig:
		return b.forCompute(c) + "; raise max_instances or lower instance_count"
	case BlockAtMax:
		return fmt.Sprintf("the cluster is at its maximum of %d nodes (max_instances)", b.Max) +
			scheduleWords(c, b.Schedule, " (set by ", ")") + "; the job starts when nodes free up"
	case BlockQuota:
		if b.Quota != nil {
			return b.Quota.need().Describe(b.Quota.Location)
		}
	case BlockShare:
		return b.shareWords(c) + "; jobs of the groups furthest below their share start first"
	}
	return b.forCompute(c)
}

func (b Block) jobName() string {
	if b.JobName != "" {
		return b.JobName
	}
	return b.Job
}

func (h *BudgetHold) words() string {
	if h == nil {
		return "a budget was reached"
	}
	return fmt.Sprintf("budget %s reached %.0f %% of %.2f %s this %s", h.Name, h.Percent, h.Amount, h.Currency, strings.ToLower(h.Period))
}

// scheduleWords describes the schedule entry named, in force on c, between
// before and after; "" when name is "" or c says nothing of it.
func scheduleWords(c *Compute, name string, around ...string) string {
	if name == "" {
		return ""
	}
	what := fmt.Sprintf("schedule %q", name)
	if c != nil {
		if a := c.Aml().ActiveSchedule; a != nil && a.Name == name {
			what = a.Describe(c.ZoneOf(name))
		}
	}
	s := around[0] + what
	if len(around) > 1 {
		s += around[1]
	}
	return s
}

// plural returns word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
