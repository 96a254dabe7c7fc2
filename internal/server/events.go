package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The event history, a Cumulus extension: GET …/computes/{name}/events
// (the compute's and its nodes' events) and GET …/jobs/{name}/events (the
// job's status changes), newest first, paged with nextLink.
//
// Query: type (comma-separated event types), node (compute events),
// since and until (RFC 3339 times or durations before now; since
// inclusive, until exclusive), $top (page size).
func (s *Server) eventRoutes() {
	s.router.handle("GET", ws+"/computes/{name}/events", s.computeEvents)
	s.router.handle("GET", ws+"/jobs/{name}/events", s.jobEvents)
}

// eventQuery is an events request's filters.
type eventQuery struct {
	types        []string // canonical spelling
	since, until time.Time
}

func parseEventQuery(r *http.Request, known []string, now time.Time) (eventQuery, error) {
	var f eventQuery
	q := r.URL.Query()
	if t := q.Get("type"); t != "" {
		for _, x := range strings.Split(t, ",") {
			x = strings.TrimSpace(x)
			canon := ""
			for _, k := range known {
				if strings.EqualFold(k, x) {
					canon = k
				}
			}
			if canon == "" {
				return f, api.BadRequest(api.CodeBadRequest, "type %q is not an event type here; use one of %s", x, strings.Join(known, ", "))
			}
			f.types = append(f.types, canon)
		}
	}
	var err error
	f.since, f.until, err = timeRange(q, now, time.Time{})
	return f, err
}

func (s *Server) computeEvents(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	f, err := parseEventQuery(r, api.EventTypes, s.clock.Now())
	if err != nil {
		return err
	}
	var before int64
	if t := r.URL.Query().Get("$skipToken"); t != "" {
		v, err := decodeSkipToken(t)
		if err == nil {
			before, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil || before <= 0 {
			return api.BadRequest(api.CodeBadRequest, "$skipToken is not a token this server issued")
		}
	}
	size := s.pageSize(r)
	evs, err := store.Events(r.Context(), s.db.Q(), store.EventFilter{Compute: d.Value.ID, Node: r.URL.Query().Get("node"),
		Types: f.types, Since: f.since, Until: f.until, Before: before, Limit: size + 1})
	if err != nil {
		return err
	}
	page := api.EventsPage{Value: []api.Event{}}
	for i, e := range evs {
		if i == size {
			page.NextLink = s.nextLink(r, "$skipToken", encodeSkipToken(strconv.FormatInt(evs[i-1].Seq, 10)))
			break
		}
		page.Value = append(page.Value, api.Event{Time: e.Time, Type: e.Type, Compute: d.Value.Name, Node: e.Node, EventDetail: e.EventDetail})
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	f, err := parseEventQuery(r, api.JobEventTypes(), s.clock.Now())
	if err != nil {
		return err
	}
	skip, err := skipParam(r)
	if err != nil {
		return err
	}
	_, compute, _ := api.ParseComputeID(j.Doc.Properties.ComputeID, api.Scope{})
	doc := j.Doc
	if err := dispatch.ParallelView(r.Context(), s.db.Q(), &doc, j.UID, s.clock.Now().UTC()); err != nil {
		return err
	}
	all := api.JobEvents(doc, compute)
	var match []api.Event
	for i := len(all) - 1; i >= 0; i-- { // newest first
		e := all[i]
		if (len(f.types) > 0 && !slices.Contains(f.types, e.Type)) || (!f.since.IsZero() && e.Time.Before(f.since)) ||
			(!f.until.IsZero() && !e.Time.Before(f.until)) {
			continue
		}
		match = append(match, e)
	}
	size := s.pageSize(r)
	page := api.EventsPage{Value: []api.Event{}}
	if skip < len(match) {
		page.Value = match[skip:min(skip+size, len(match))]
	}
	if skip+size < len(match) {
		page.NextLink = s.nextLink(r, "$skip", strconv.Itoa(skip+size))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
