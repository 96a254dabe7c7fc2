package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Submission is a job to create, or to re-submit under a name that exists.
type Submission struct {
	Workspace api.Scope
	Name      string
	// Job is the document as submitted, prepared (api.PrepareJob) and with
	// what the caller resolves filled in (its image); read-only fields are
	// dropped here.
	Job       api.Job
	Principal string // who submits, for systemData
	// Parent is the job that creates this one as its child (a sweep's
	// trial), nil for a job a caller submits. A child's name is its own:
	// one that exists is an error (store.ErrExists), never an update.
	Parent *store.Job
	// Compute, when not nil, is given the compute the job was checked
	// against (its document as read in the transaction).
	Compute *api.Compute
}

// Submit creates a job, queued with its history (NotStarted, Queued), its
// id, a submission sequence and its owner; or, when a job of that name
// exists in the workspace, applies what may change after submission (its
// metadata: description, tags, display name, archive flag) and refuses any
// change of what it runs with 409 PropertyChangeNotAllowed naming the
// fields. Every kind of job goes through it: command jobs, sweeps and their
// trials.
//
// It checks the compute the job runs on (it exists in the job's workspace,
// is not being deleted, and can ever hold the nodes a run needs), and on a
// fair-share compute puts the job in its group (a child in its parent's). A job that
// holds no nodes itself (a sweep: its trials do) is stored without a compute,
// so the scheduler never sees it. created says whether the job is new.
func Submit(ctx context.Context, q store.Querier, s Submission, now time.Time) (j store.Job, created bool, err error) {
	doc := s.Job
	doc.ClearReadOnly()
	if s.Parent == nil {
		doc.Properties.ParentJobName, doc.Properties.Parameters = "", nil // a child's, set by its parent
	}
	comp, err := computesFor(ctx, q, s.Workspace, &doc)
	if err != nil {
		return j, false, err
	}
	compID := comp.ID
	if s.Compute != nil {
		*s.Compute = comp
	}
	old, err := store.GetJob(ctx, q, s.Workspace.WorkspaceID(), s.Name)
	switch {
	case err == nil && s.Parent != nil:
		return old, false, fmt.Errorf("job %s: %w", s.Name, store.ErrExists)
	case err == nil:
		if changed := api.ChangedSpec(&old.Doc, &doc); len(changed) > 0 {
			return old, false, api.Conflict(api.CodeImmutable, "job %s exists and its %s cannot change; submit a new job with another name",
				old.Doc.Name, strings.Join(changed, ", "))
		}
		old.Doc.SetMetadata(&doc)
		old.Doc.SystemData = api.Touch(old.Doc.SystemData, s.Principal, now)
		if old.Doc.Properties.FairShareGroup != nil {
			old.Doc.Properties.FairShareGroup = groupOf(comp.Queue(), &old.Doc, nil) // its tags may have changed
		}
		return old, false, store.UpdateJob(ctx, q, &old)
	case !errors.Is(err, store.ErrNotFound):
		return old, false, err
	}

	doc.ID, doc.Name, doc.Type = s.Workspace.JobID(s.Name), s.Name, api.TypeJob
	doc.Properties.ComputeID = compID
	doc.SystemData = api.Touch(nil, s.Principal, now)
	var parent *api.Job
	if s.Parent != nil {
		doc.SystemData = s.Parent.Doc.SystemData
		parent = &s.Parent.Doc
	}
	doc.Properties.FairShareGroup = groupOf(comp.Queue(), &doc, parent)
	doc.SetStatus(api.JobNotStarted, now, "")
	doc.SetStatus(api.JobQueued, now, "")
	// The id starts with the submission's time: the indexes keyed by it
	// (the job's, its runs') take new jobs at their end, a page or two a
	// commit, rather than each in a random page of every job ever stored.
	j = store.Job{UID: secret.NewTimeID(now), Parent: s.Workspace.WorkspaceID(), Created: now, Doc: doc}
	if holdsNodes(&doc) {
		j.Compute = compID
	}
	if err := store.InsertJob(ctx, q, &j); err != nil {
		return j, false, err
	}
	return j, true, nil
}

// holdsNodes says whether a job runs on nodes itself; a sweep and a
// pipeline do not (their trials and steps do).
func holdsNodes(j *api.Job) bool { return !j.IsParent() }

// computesFor checks the computes a job runs on and returns the id of its
// own: a pipeline's steps each run on theirs (the pipeline's default
// compute, when it has one, is checked too).
func computesFor(ctx context.Context, q store.Querier, ws api.Scope, j *api.Job) (api.Compute, error) {
	if !j.IsPipeline() {
		return computeFor(ctx, q, ws, j)
	}
	order, err := j.StepOrder()
	if err != nil {
		return api.Compute{}, api.BadRequest(api.CodeValidationError, "jobs: %s", err)
	}
	for _, st := range order {
		child, err := j.StepJob(st.Name, api.StepJobName(j.Name, st.Name), api.PlaceholderOutput)
		if err == nil {
			_, err = computeFor(ctx, q, ws, &child)
		}
		var ae *api.Error
		if errors.As(err, &ae) {
			ae.Message = "step " + st.Name + ": " + ae.Message
			return api.Compute{}, ae
		}
		if err != nil {
			return api.Compute{}, err
		}
	}
	if j.Properties.ComputeID == "" {
		return api.Compute{}, nil // no compute of its own: no queue, no group
	}
	return computeFor(ctx, q, ws, j)
}

// computeFor reads the compute a job names and checks that it can run the
// job: in the job's workspace, not being deleted, with a maxNodeCount (its
// own or a schedule's) that can ever hold the nodes one run needs.
func computeFor(ctx context.Context, q store.Querier, ws api.Scope, j *api.Job) (api.Compute, error) {
	csc, name, err := api.ParseComputeID(j.Properties.ComputeID, ws)
	if err != nil {
		return api.Compute{}, api.BadRequest(api.CodeValidationError, "computeId: %s", err)
	}
	if !store.SameKey(csc.WorkspaceID(), ws.WorkspaceID()) {
		return api.Compute{}, api.BadRequest(api.CodeValidationError, "computeId must name a compute of workspace %s", ws.Workspace)
	}
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, ws.WorkspaceID(), name)
	if errors.Is(err, store.ErrNotFound) {
		return api.Compute{}, api.BadRequest(api.CodeValidationError, "computeId: compute %s does not exist in workspace %s; create it with 'cumulus compute create'", name, ws.Workspace)
	}
	if err != nil {
		return api.Compute{}, err
	}
	c := d.Value
	if c.Properties.ProvisioningState == api.StateDeleting {
		return c, api.Conflict(api.CodeOperationInProgress, "compute %s is being deleted", c.Name)
	}
	n, field := j.NodeCount()
	if most := c.LargestMax(); n > most {
		return c, api.BadRequest(api.CodeValidationError, "%s %d is more than compute %s can ever have (maxNodeCount %d)", field, n, c.Name, most)
	}
	return c, nil
}

// groupOf is the fair-share group of job j under policy q: nil unless q
// is fair share; a child's is its parent's.
func groupOf(q api.Queue, j, parent *api.Job) *string {
	if !q.FairShare {
		return nil
	}
	if parent != nil {
		j = parent
	}
	g := q.GroupOf(j)
	return &g
}
