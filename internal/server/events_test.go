package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The events API pages a compute's history newest first, filters it by
// type, node and time, refuses bad filters in ARM's error shape, and
// answers only callers who may read the compute.
func TestComputeEventsAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.create("cpu", computeBody())
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		e := store.Event{Compute: c.ID, Node: "n" + string(rune('0'+i%2)), Type: []string{api.EventNodeRequested, api.EventNodeUnusable}[i%2], Time: t0.Add(time.Duration(i) * time.Minute)}
		e.Reason = "reason " + string(rune('a'+i))
		if err := store.AddEvent(ctx, h.db.W(), e); err != nil {
			t.Fatal(err)
		}
	}
	path := computePath("cpu") + "/events"
	var page api.EventsPage
	h.do("GET", path, nil).want(t, 200).json(t, &page)
	if len(page.Value) != hPageSize || page.NextLink == "" || !page.Value[0].Time.Equal(t0.Add(4*time.Minute)) || page.Value[0].Compute != "cpu" {
		t.Fatalf("first page = %+v, want %d newest events of cpu and a nextLink", page, hPageSize)
	}
	var rest api.EventsPage
	h.do("GET", h.absoluteLink(t, page.NextLink).String(), nil).want(t, 200).json(t, &rest)
	if len(rest.Value) != 2 || rest.NextLink != "" || rest.Value[1].Reason != "reason a" {
		t.Fatalf("second page = %+v, want the 2 oldest and no nextLink", rest)
	}
	h.do("GET", path+"?type=nodeunusable&node=n1", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 2 || page.Value[0].Type != api.EventNodeUnusable || page.Value[0].Node != "n1" {
		t.Fatalf("unusable events of n1 = %+v, want 2", page.Value)
	}
	since, until := url.QueryEscape(t0.Add(time.Minute).Format(time.RFC3339)), url.QueryEscape(t0.Add(3*time.Minute).Format(time.RFC3339))
	h.do("GET", path+"?since="+since+"&until="+until, nil).want(t, 200).json(t, &page)
	if len(page.Value) != 2 {
		t.Fatalf("events in minutes 1..3 = %d, want 2", len(page.Value))
	}

	for _, bad := range []string{"?type=NodeExploded", "?since=yesterday", "?since=" + until + "&until=" + since, "?$skipToken=zzz"} {
		r := h.do("GET", path+bad, nil).want(t, 400)
		checkErrorShape(t, bad, r)
	}
	h.do("GET", computePath("nope")+"/events", nil).want(t, 404)

	reader := h.user("reader", "Reader", hWSPath)
	stranger := h.user("stranger", "", "")
	h.as(reader, "GET", path, nil).want(t, 200)
	r := h.as(stranger, "GET", path, nil).want(t, 403, api.CodeForbidden)
	if strings.Contains(string(r.Body), "reason") {
		t.Errorf("a refused caller sees events: %s", r.Body)
	}
}

// A job's events are its status history, newest first, with the attempt
// and nodes of each run; readers of the workspace may read them, others
// may not.
func TestJobEventsAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.create("cpu", computeBody())
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	j := store.Job{UID: "u1", Parent: c.ID[:strings.Index(c.ID, "/computes/")], Compute: c.ID, Created: t0,
		Doc: api.Job{Name: "train", Properties: api.JobProperties{JobType: api.JobTypeCommand, Command: "true", ComputeID: c.ID}}}
	d := &j.Doc
	d.SetStatus(api.JobQueued, t0, "")
	d.SetStatus(api.JobPreparing, t0.Add(time.Second), "")
	d.Properties.Attempts = []api.Attempt{{Number: 1, Nodes: []string{"n1"}}, {Number: 2, Nodes: []string{"n2"}}}
	d.SetStatus(api.JobRunning, t0.Add(2*time.Second), "")
	d.SetStatus(api.JobQueued, t0.Add(3*time.Second), "node n1 was preempted")
	d.SetStatus(api.JobPreparing, t0.Add(4*time.Second), "")
	d.SetStatus(api.JobRunning, t0.Add(5*time.Second), "")
	d.SetStatus(api.JobCompleted, t0.Add(6*time.Second), "")
	if err := store.InsertJob(ctx, h.db.W(), &j); err != nil {
		t.Fatal(err)
	}
	path := hWSPath + "/jobs/train/events"
	var page, all api.EventsPage
	h.do("GET", path, nil).want(t, 200).json(t, &page)
	all.Value = page.Value
	for page.NextLink != "" {
		link := page.NextLink
		page = api.EventsPage{}
		h.do("GET", h.absoluteLink(t, link).String(), nil).want(t, 200).json(t, &page)
		all.Value = append(all.Value, page.Value...)
	}
	page = all
	if len(page.Value) != 7 {
		t.Fatalf("events = %+v, want 7", page.Value)
	}
	last, requeued := page.Value[0], page.Value[3]
	if last.Type != "JobCompleted" || last.Attempt != 2 || len(last.Nodes) != 1 || last.Nodes[0] != "n2" || last.Job != "train" || last.Compute != "cpu" {
		t.Errorf("newest = %+v, want JobCompleted of attempt 2 on n2", last)
	}
	if requeued.Type != "JobQueued" || requeued.Reason != "node n1 was preempted" || requeued.From != api.JobRunning || requeued.Attempt != 0 {
		t.Errorf("requeue = %+v, want JobQueued from Running with the reason", requeued)
	}
	if first := page.Value[5]; first.Attempt != 1 || first.Nodes[0] != "n1" {
		t.Errorf("first preparing = %+v, want attempt 1 on n1", first)
	}
	h.do("GET", path+"?type=JobQueued", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 2 {
		t.Errorf("queued events = %d, want 2", len(page.Value))
	}
	checkErrorShape(t, "bad type", h.do("GET", path+"?type=NodeReady", nil).want(t, 400))
	h.do("GET", hWSPath+"/jobs/nope/events", nil).want(t, 404)
	stranger := h.user("stranger", "", "")
	h.as(stranger, "GET", path, nil).want(t, 403, api.CodeForbidden)
}
