package armsdk_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	ml "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/machinelearning/armmachinelearning/v4"
)

// TestSweepJobWithSDK: the Azure SDK's SweepJob (polymorphic sampling
// algorithm, early termination policy and limits) is accepted and comes
// back as the SDK's types, with Cumulus's read-only fields ignored.
func TestSweepJobWithSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	poller, err := e.computes.BeginCreateOrUpdate(ctx, rg, ws, "sweep-cpu", ml.ComputeResource{Location: to.Ptr(loc),
		Properties: &ml.AmlCompute{ComputeType: to.Ptr(ml.ComputeTypeAmlCompute), Properties: &ml.AmlComputeProperties{
			VMSize: to.Ptr("STANDARD_D2_V2"), ScaleSettings: &ml.ScaleSettings{MaxNodeCount: to.Ptr[int32](2)}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := poller.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	job := ml.JobBase{Properties: &ml.SweepJob{
		JobType:     to.Ptr(ml.JobTypeSweep),
		ComputeID:   c.ID,
		Trial:       &ml.TrialComponent{Command: to.Ptr("python train.py --lr ${{search_space.lr}} --bs ${{search_space.bs}}"), EnvironmentID: to.Ptr("image:python:3.12")},
		SearchSpace: map[string]any{"lr": []any{"loguniform", []any{-6, -1}}, "bs": []any{"choice", []any{[]any{16, 32}}}},
		SamplingAlgorithm: &ml.RandomSamplingAlgorithm{SamplingAlgorithmType: to.Ptr(ml.SamplingAlgorithmTypeRandom),
			Rule: to.Ptr(ml.RandomSamplingAlgorithmRuleRandom), Seed: to.Ptr[int32](5)},
		Objective: &ml.Objective{Goal: to.Ptr(ml.GoalMaximize), PrimaryMetric: to.Ptr("val_acc")},
		Limits: &ml.SweepJobLimits{JobLimitsType: to.Ptr(ml.JobLimitsTypeSweep), MaxTotalTrials: to.Ptr[int32](4),
			MaxConcurrentTrials: to.Ptr[int32](2), TrialTimeout: to.Ptr("PT10M")},
		EarlyTermination: &ml.BanditPolicy{PolicyType: to.Ptr(ml.EarlyTerminationPolicyTypeBandit), SlackFactor: to.Ptr[float32](0.1),
			EvaluationInterval: to.Ptr[int32](1), DelayEvaluation: to.Ptr[int32](2)},
	}}
	resp, err := e.jobs.CreateOrUpdate(ctx, rg, ws, "sdk-sweep", job, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.jobs.Get(ctx, rg, ws, "sdk-sweep", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []ml.JobBase{resp.JobBase, got.JobBase} {
		sj, ok := r.Properties.(*ml.SweepJob)
		if !ok {
			t.Fatalf("properties are %T, want *SweepJob", r.Properties)
		}
		alg, ok := sj.SamplingAlgorithm.(*ml.RandomSamplingAlgorithm)
		if !ok || *alg.Seed != 5 {
			t.Errorf("sampling algorithm %#v", sj.SamplingAlgorithm)
		}
		bandit, ok := sj.EarlyTermination.(*ml.BanditPolicy)
		if !ok || *bandit.SlackFactor != 0.1 || *bandit.DelayEvaluation != 2 {
			t.Errorf("early termination %#v", sj.EarlyTermination)
		}
		if *sj.Objective.Goal != ml.GoalMaximize || *sj.Limits.MaxTotalTrials != 4 || *sj.Limits.TrialTimeout != "PT10M" ||
			*sj.Trial.Command != "python train.py --lr ${{search_space.lr}} --bs ${{search_space.bs}}" || sj.SearchSpace == nil {
			t.Errorf("sweep %+v", sj)
		}
	}
}
