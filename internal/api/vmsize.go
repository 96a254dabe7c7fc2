package api

import "github.com/cumulus-ml/cumulus/internal/catalog"

// VMSizeOf renders a catalog size as the vmSizes API returns it.
func VMSizeOf(s catalog.Size) VMSize {
	prices := []VMPrice{{RetailPrice: s.Price, OSType: OSLinux, VMTier: "Standard"}}
	if s.LowPriority {
		prices = append(prices, VMPrice{RetailPrice: s.LowPrice, OSType: OSLinux, VMTier: "LowPriority"})
	}
	return VMSize{
		Name: s.Name, Family: s.Family, VCPUs: int32(s.VCPUs), GPUs: int32(s.GPUs),
		OSVhdSizeMB: int32(s.OSDiskMB), MaxResourceVolumeMB: int32(min(s.TempDiskMB, 1<<31-1)),
		MemoryGB: s.MemoryGB, LowPriorityCapable: s.LowPriority, PremiumIO: s.PremiumIO,
		EstimatedVMPrices:     &VMPrices{BillingCurrency: "USD", UnitOfMeasure: "OneHour", Values: prices},
		SupportedComputeTypes: []string{ComputeTypeAml, "ComputeInstance"},
	}
}
