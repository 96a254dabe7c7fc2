package store

import (
	"context"
	"reflect"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A job on nodes and a compute are read again and again: a caller that
// changes what it was given in place (a map, a slice, a pointed-to
// struct) changes nothing the next read returns, and a write is read back
// as written, not as an earlier read decoded it.
func TestReadsOfHeldRowsAreEachTheirOwn(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	j := queuedJob("j1", "train", 2, 0, "", "")
	j.Doc.Properties.EnvironmentVariables = map[string]string{"A": "1"}
	if err := db.Tx(ctx, func(q Querier) error { return InsertJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	j.Doc.Properties.Status, j.Nodes = api.JobRunning, []string{"n1", "n2"}
	if err := db.Tx(ctx, func(q Querier) error { return UpdateJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	first, err := GetJobByUID(ctx, db.Q(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := GetJobByUID(ctx, db.Q(), "j1")
	for range 2 { // the second read is answered from what the first decoded
		got, err := GetJobByUID(ctx, db.Q(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		got.Nodes[0] = "changed"
		got.Doc.Properties.EnvironmentVariables["A"] = "changed"
		got.Doc.Properties.Resources.InstanceCount = 9
		got.Exits = map[string]int{"n1": 1}
	}
	if again, _ := GetJobByUID(ctx, db.Q(), "j1"); !reflect.DeepEqual(again, want) || !reflect.DeepEqual(first, want) {
		t.Fatalf("a caller's change of its copy shows in the next read:\n%+v\nwant\n%+v", again.Doc.Properties, want.Doc.Properties)
	}
	j.Doc.Properties.EnvironmentVariables["A"] = "2"
	if err := db.Tx(ctx, func(q Querier) error { return UpdateJob(ctx, q, j) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := GetJobByUID(ctx, db.Q(), "j1"); got.Doc.Properties.EnvironmentVariables["A"] != "2" {
		t.Fatalf("after an update the job reads A=%s, want 2", got.Doc.Properties.EnvironmentVariables["A"])
	}

	maxNodes := int32(4)
	c := api.Compute{Name: "cpu", Tags: map[string]string{"team": "a"}, Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml,
		Properties: &api.AmlComputeProperties{ScaleSettings: &api.ScaleSettings{MaxNodeCount: &maxNodes}}}}
	if _, err := Put(ctx, db.W(), KindCompute, "/ws", "cpu", c, 0, j.Created); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d, err := Get[api.Compute](ctx, db.Q(), KindCompute, "/ws", "cpu")
		if err != nil {
			t.Fatal(err)
		}
		if d.Value.Tags["team"] != "a" || *d.Value.Properties.Properties.ScaleSettings.MaxNodeCount != 4 {
			t.Fatalf("the compute reads %+v, changed by an earlier caller's copy", d.Value)
		}
		d.Value.Tags["team"] = "changed"
		*d.Value.Properties.Properties.ScaleSettings.MaxNodeCount = 9
	}
	c.Tags["team"] = "b"
	if _, err := Put(ctx, db.W(), KindCompute, "/ws", "cpu", c, 0, j.Created); err != nil {
		t.Fatal(err)
	}
	if d, _ := Get[api.Compute](ctx, db.Q(), KindCompute, "/ws", "cpu"); d.Value.Tags["team"] != "b" {
		t.Fatalf("after a put the compute reads team=%s, want b", d.Value.Tags["team"])
	}
}
