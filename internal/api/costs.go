package api

import "time"

// CostRow is one group's use and cost. Node-hours are billed hours (a node
// from its request to its removal); busy hours are those a job held the
// node, idle the rest.
type CostRow struct {
	Key           string  `json:"key"`
	Workspace     string  `json:"workspace,omitempty"`
	Compute       string  `json:"compute,omitempty"`
	NodeHours     float64 `json:"nodeHours"`
	BusyNodeHours float64 `json:"busyNodeHours"`
	IdleNodeHours float64 `json:"idleNodeHours"`
	Cost          float64 `json:"cost"`
	BusyCost      float64 `json:"busyCost"`
	IdleCost      float64 `json:"idleCost"`
}

// CostReport is the cost of a period, grouped one way (GET …/costs, a
// Cumulus extension).
type CostReport struct {
	Currency string    `json:"currency"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	By       string    `json:"by"`
	Rows     []CostRow `json:"rows"`
	Total    CostRow   `json:"total"`
	// Unpriced lists the sizes the prices do not cover; their nodes'
	// hours are counted at no cost.
	Unpriced []string `json:"unpriced,omitempty"`
}
