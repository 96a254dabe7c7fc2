// Package metricstest reads an exposition the way Prometheus does, for
// tests: it scrapes a metrics handler and parses the text with
// Prometheus's own parser, so tests can use the client library's
// testutil on what Cumulus really serves.
package metricstest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Gatherer scrapes h at each Gather and parses its answer; an answer
// other than 200, or text Prometheus would not accept, is an error.
func Gatherer(h http.Handler) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("scrape: %d %s", rec.Code, rec.Body.String())
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(rec.Body)
		if err != nil {
			return nil, fmt.Errorf("scrape: %w", err)
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, f := range fams {
			out = append(out, f)
		}
		sort.Slice(out, func(i, k int) bool { return out[i].GetName() < out[k].GetName() })
		return out, nil
	})
}
