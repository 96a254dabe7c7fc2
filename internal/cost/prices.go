// Package cost turns the ledger of node lives and job runs into what each
// cluster, job, workspace or tag cost, and judges budgets. Its reports
// and judgements are pure; ReadInput reads the ledger from the store and
// Load a price file.
package cost

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
)

// Prices are hourly prices per VM size and tier, in one currency.
type Prices struct {
	Currency string
	sizes    map[string]Price // by lower-case size name
	fallback bool             // sizes not listed take the catalogue's (USD) price
}

// Price is one size's hourly price per tier.
type Price struct {
	Dedicated   float64 `yaml:"dedicated"`
	LowPriority float64 `yaml:"low_priority"`
}

// Catalog is the built-in catalogue's prices: Azure's Linux list prices
// in USD.
func Catalog() Prices { return Prices{Currency: "USD", sizes: map[string]Price{}, fallback: true} }

// priceFile is the YAML of a price file.
type priceFile struct {
	Currency string           `yaml:"currency"`
	Sizes    map[string]Price `yaml:"sizes"`
}

// Load reads a price file:
//
//	currency: EUR
//	sizes:
//	  Standard_NC6s_v3: {dedicated: 2.80, low_priority: 0.56}
//
// In USD, sizes it does not list keep the catalogue's price; in another
// currency they have none (a report says which sizes were unpriced).
func Load(path string) (Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Prices{}, fmt.Errorf("price file: %w", err)
	}
	var f priceFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Prices{}, fmt.Errorf("price file %s: %w", path, err)
	}
	return parse(f, path)
}

func parse(f priceFile, path string) (Prices, error) {
	cur := strings.ToUpper(strings.TrimSpace(f.Currency))
	if cur == "" {
		cur = "USD"
	}
	if len(cur) != 3 {
		return Prices{}, fmt.Errorf("price file %s: currency %q is not a three-letter code such as USD or EUR", path, f.Currency)
	}
	p := Prices{Currency: cur, sizes: map[string]Price{}, fallback: cur == "USD"}
	var errs []error
	for name, pr := range f.Sizes {
		if pr.Dedicated < 0 || pr.LowPriority < 0 {
			errs = append(errs, fmt.Errorf("price file %s: %s: prices may not be negative", path, name))
		}
		p.sizes[strings.ToLower(name)] = pr
	}
	return p, errors.Join(errs...)
}

// Hourly is the price of one node-hour of a size and tier, and whether
// there is one.
func (p Prices) Hourly(size, priority string) (float64, bool) {
	low := strings.EqualFold(priority, api.PriorityLowPriority)
	if pr, ok := p.sizes[strings.ToLower(size)]; ok {
		if low {
			return pr.LowPriority, true
		}
		return pr.Dedicated, true
	}
	if !p.fallback {
		return 0, false
	}
	s, ok := catalog.Lookup(size)
	if !ok {
		return 0, false
	}
	return s.HourlyPrice(low), true
}
