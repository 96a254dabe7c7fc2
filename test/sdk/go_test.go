package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	ml "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/machinelearning/armmachinelearning/v4"
)

// cumulusCredential hands out the token 'cumulus sdk token' printed.
type cumulusCredential string

func (c cumulusCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// The same scenario with the Go SDK at its default api-version, over the
// default transport: the server's certificate is trusted through
// SSL_CERT_FILE alone, as 'cumulus sdk env' sets it.
func TestGoSDK(t *testing.T) {
	t.Setenv("SSL_CERT_FILE", getenv("SSL_CERT_FILE")) // read by crypto/x509 at the first TLS handshake of this process
	ctx := context.Background()
	sub, rg, ws := getenv("AZURE_SUBSCRIPTION_ID"), getenv("AZURE_RESOURCE_GROUP"), getenv("AZUREML_WORKSPACE_NAME")
	opts := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{
				ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com/",
				Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
					cloud.ResourceManager: {Endpoint: getenv("CUMULUS_ENDPOINT"), Audience: "https://management.core.windows.net/"},
				},
			},
		},
		DisableRPRegistration: true,
	}
	f, err := ml.NewClientFactory(sub, cumulusCredential(getenv("CUMULUS_TOKEN")), opts)
	if err != nil {
		t.Fatal(err)
	}
	poll := &runtime.PollUntilDoneOptions{Frequency: 500 * time.Millisecond}
	wsc, computes, jobs := f.NewWorkspacesClient(), f.NewComputeClient(), f.NewJobsClient()

	w, err := wsc.Get(ctx, rg, ws, nil)
	if err != nil {
		t.Fatalf("workspace get: %v", err)
	}
	loc := *w.Location
	up, err := wsc.BeginUpdate(ctx, rg, ws, ml.WorkspaceUpdateParameters{
		Properties: &ml.WorkspacePropertiesUpdateParameters{Description: to.Ptr("from the Go SDK")},
		Tags:       map[string]*string{"sdk": to.Ptr("go")},
	}, nil)
	if err != nil {
		t.Fatalf("workspace update: %v", err)
	}
	wu, err := up.PollUntilDone(ctx, poll)
	if err != nil || wu.Properties == nil || wu.Properties.Description == nil || *wu.Properties.Description != "from the Go SDK" {
		t.Fatalf("workspace update: %v %+v", err, wu.Properties)
	}

	cluster := func(size string, hi int32, prio ml.VMPriority, tags map[string]*string) ml.ComputeResource {
		return ml.ComputeResource{Location: &loc, Tags: tags, Properties: &ml.AmlCompute{ComputeType: to.Ptr(ml.ComputeTypeAmlCompute),
			Properties: &ml.AmlComputeProperties{VMSize: to.Ptr(size), VMPriority: to.Ptr(prio),
				ScaleSettings: &ml.ScaleSettings{MinNodeCount: to.Ptr[int32](0), MaxNodeCount: to.Ptr(hi), NodeIdleTimeBeforeScaleDown: to.Ptr("PT120S")}}}}
	}
	for name, c := range map[string]ml.ComputeResource{
		"go-cpu": cluster("STANDARD_DS3_V2", 4, ml.VMPriorityDedicated, map[string]*string{"team": to.Ptr("research")}),
		"go-gpu": cluster("STANDARD_NC6S_V3", 2, ml.VMPriorityDedicated, map[string]*string{"gpu": to.Ptr("v100")}),
		"go-low": cluster("STANDARD_DS3_V2", 8, ml.VMPriorityLowPriority, map[string]*string{"cost": to.Ptr("low")}),
	} {
		p, err := computes.BeginCreateOrUpdate(ctx, rg, ws, name, c, nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, poll)
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	got, err := computes.Get(ctx, rg, ws, "go-cpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := got.Properties.(*ml.AmlCompute)
	if !ok || *a.Properties.ScaleSettings.MaxNodeCount != 4 || *got.Tags["team"] != "research" {
		t.Fatalf("get: %T %+v", got.Properties, got.Tags)
	}
	n := 0
	for pager := computes.NewListPager(rg, ws, nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n < 3 {
		t.Errorf("list: %d computes", n)
	}
	upd, err := computes.BeginUpdate(ctx, rg, ws, "go-cpu", ml.ClusterUpdateParameters{Properties: &ml.ClusterUpdateProperties{
		Properties: &ml.ScaleSettingsInformation{ScaleSettings: &ml.ScaleSettings{MinNodeCount: to.Ptr[int32](0), MaxNodeCount: to.Ptr[int32](6), NodeIdleTimeBeforeScaleDown: to.Ptr("PT600S")}}}}, nil)
	if err == nil {
		_, err = upd.PollUntilDone(ctx, poll)
	}
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	keys, err := computes.ListKeys(ctx, rg, ws, "go-cpu", nil)
	if err != nil {
		t.Fatalf("listKeys: %v", err)
	}
	if _, ok := keys.ComputeSecretsClassification.(*ml.VirtualMachineSecrets); !ok {
		t.Errorf("listKeys decodes as %T, want *VirtualMachineSecrets", keys.ComputeSecretsClassification)
	}
	sizes, err := f.NewVirtualMachineSizesClient().List(ctx, loc, nil)
	if err != nil || len(sizes.Value) == 0 {
		t.Fatalf("sizes: %v", err)
	}
	usages := f.NewUsagesClient().NewListPager(loc, nil)
	if page, err := usages.NextPage(ctx); err != nil || len(page.Value) == 0 {
		t.Fatalf("usages: %v", err)
	}

	// An unsupported call: the ARM error, as a typed ResponseError.
	_, err = computes.BeginStart(ctx, rg, ws, "go-cpu", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest || re.ErrorCode != "UserError" {
		t.Errorf("start of an AmlCompute: %v", err)
	}

	// Cumulus has no curated environments: register the one the job names.
	_, err = f.NewEnvironmentVersionsClient().CreateOrUpdate(ctx, rg, ws, "AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "1",
		ml.EnvironmentVersion{Properties: &ml.EnvironmentVersionProperties{Image: to.Ptr("python:3.11-slim")}}, nil)
	if err != nil {
		t.Fatalf("environment: %v", err)
	}
	job := fresh("go-job")
	j, err := jobs.CreateOrUpdate(ctx, rg, ws, job, ml.JobBase{Properties: &ml.CommandJob{
		JobType: to.Ptr(ml.JobTypeCommand), Command: to.Ptr("echo hello from cumulus"),
		EnvironmentID: to.Ptr("azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest"), ComputeID: got.ID}}, nil)
	if err != nil {
		t.Fatalf("job create: %v", err)
	}
	if j.Properties.GetJobBaseProperties().Status == nil {
		t.Errorf("job has no status")
	}
	cp, err := jobs.BeginCancel(ctx, rg, ws, job, nil)
	if err == nil {
		_, err = cp.PollUntilDone(ctx, poll)
	}
	if err != nil {
		t.Fatalf("job cancel: %v", err)
	}
	for _, name := range []string{"go-cpu", "go-gpu", "go-low"} {
		p, err := computes.BeginDelete(ctx, rg, ws, name, ml.UnderlyingResourceActionDelete, nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, poll)
		}
		if err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
}
