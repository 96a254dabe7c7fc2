package api

// Usage is one row of the usages list of a location.
type Usage struct {
	ID                   string    `json:"id"`
	AmlWorkspaceLocation string    `json:"amlWorkspaceLocation"`
	Type                 string    `json:"type"`
	Unit                 string    `json:"unit"`
	CurrentValue         int64     `json:"currentValue"`
	Limit                int64     `json:"limit"`
	Name                 UsageName `json:"name"`
}

// UsageName is a usage or quota's name and display name.
type UsageName struct {
	Value          string `json:"value"`
	LocalizedValue string `json:"localizedValue"`
}

// Quota is one ResourceQuota row.
type Quota struct {
	ID                   string    `json:"id"`
	AmlWorkspaceLocation string    `json:"amlWorkspaceLocation,omitempty"`
	Type                 string    `json:"type"`
	Name                 UsageName `json:"name"`
	Limit                int64     `json:"limit"`
	Unit                 string    `json:"unit"`
}

// QuotaUpdate is one entry of an updateQuotas request or answer.
type QuotaUpdate struct {
	ID     string `json:"id"`
	Type   string `json:"type,omitempty"`
	Limit  int64  `json:"limit"`
	Unit   string `json:"unit,omitempty"`
	Status string `json:"status,omitempty"`
}

// QuotaUpdateRequest is the updateQuotas body.
type QuotaUpdateRequest struct {
	Value    []QuotaUpdate `json:"value"`
	Location string        `json:"location,omitempty"`
}

// Usage and quota types as Azure writes them.
const (
	UsageTypeTotal       = Provider + "/totalCores/usages"
	UsageTypeDedicated   = Provider + "/dedicatedCores/usages"
	UsageTypeFamily      = Provider + "/vmFamily/usages"
	UsageTypeLowPriority = Provider + "/lowPriorityCores/usages"
	QuotaType            = Provider + "/workspaces/quotas"

	QuotaStatusSuccess       = "Success"
	QuotaStatusInvalidFamily = "InvalidVMFamilyName"
	QuotaStatusBelowMinimum  = "InvalidQuotaBelowClusterMinimum"
)

// VMSize is one VirtualMachineSize of the catalog.
type VMSize struct {
	Name                  string    `json:"name"`
	Family                string    `json:"family"`
	VCPUs                 int32     `json:"vCPUs"`
	GPUs                  int32     `json:"gpus"`
	OSVhdSizeMB           int32     `json:"osVhdSizeMB"`
	MaxResourceVolumeMB   int32     `json:"maxResourceVolumeMB"`
	MemoryGB              float64   `json:"memoryGB"`
	LowPriorityCapable    bool      `json:"lowPriorityCapable"`
	PremiumIO             bool      `json:"premiumIO"`
	EstimatedVMPrices     *VMPrices `json:"estimatedVMPrices,omitempty"`
	SupportedComputeTypes []string  `json:"supportedComputeTypes"`
	GPUModel              string    `json:"-"`
}

// VMPrices is the estimated hourly price block of a size.
type VMPrices struct {
	BillingCurrency string    `json:"billingCurrency"`
	UnitOfMeasure   string    `json:"unitOfMeasure"`
	Values          []VMPrice `json:"values"`
}

// VMPrice is one price of a size for an OS and tier.
type VMPrice struct {
	RetailPrice float64 `json:"retailPrice"`
	OSType      string  `json:"osType"`
	VMTier      string  `json:"vmTier"`
}

// VMSizeList is the vmSizes answer (no paging).
type VMSizeList struct {
	Value []VMSize `json:"value"`
	// AmlCompute is the same list under the name api-versions up to 2021
	// give it; set only for them.
	AmlCompute []VMSize `json:"amlCompute,omitempty"`
}
