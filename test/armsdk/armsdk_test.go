// Package armsdk_test drives Cumulus with the official Azure SDK for Go
// (armmachinelearning/v4 over azcore), the way an Azure user's program
// would: TLS with the server's self-signed certificate, a bearer token,
// long-running operations and pagers.
package armsdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	ml "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/machinelearning/armmachinelearning/v4"

	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/server"
)

const (
	sub = "00000000-0000-0000-0000-000000000001"
	rg  = "sdk-rg"
	ws  = "sdk-ws"
	loc = "westus2"
)

// staticToken is a TokenCredential that hands out the admin token.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

type env struct {
	d        *daemon.Daemon
	http     *http.Client
	computes *ml.ComputeClient
	ws       *ml.WorkspacesClient
	usages   *ml.UsagesClient
	sizes    *ml.VirtualMachineSizesClient
	quotas   *ml.QuotasClient
	jobs     *ml.JobsClient
	factory  *ml.ClientFactory
}

var poll = &runtime.PollUntilDoneOptions{Frequency: time.Second}

func newEnv(t *testing.T) *env {
	t.Helper()
	o := daemon.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.TLSSelfSigned = true
	o.Defaults = server.Defaults{Subscription: sub, ResourceGroup: rg, Location: loc, Workspace: ws}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := daemon.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if d.Token == "" || d.CAFile == "" || !strings.HasPrefix(d.URL, "https://") {
		t.Fatalf("daemon: url %q token set %v ca %q", d.URL, d.Token != "", d.CAFile)
	}
	pem, err := os.ReadFile(d.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the CA file")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: time.Minute}
	opts := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{
				ActiveDirectoryAuthorityHost: "https://login.invalid/",
				Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
					cloud.ResourceManager: {Endpoint: d.URL, Audience: "https://management.core.windows.net/"},
				},
			},
			Transport: hc,
			Retry:     policy.RetryOptions{MaxRetries: -1},
		},
		DisableRPRegistration: true,
	}
	f, err := ml.NewClientFactory(sub, staticToken(d.Token), opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{d: d, http: hc, computes: f.NewComputeClient(), ws: f.NewWorkspacesClient(), usages: f.NewUsagesClient(),
		sizes: f.NewVirtualMachineSizesClient(), quotas: f.NewQuotasClient(), jobs: f.NewJobsClient(), factory: f}
}

func amlOf(t *testing.T, r ml.ComputeResource) *ml.AmlCompute {
	t.Helper()
	a, ok := r.Properties.(*ml.AmlCompute)
	if !ok {
		t.Fatalf("properties are %T, want *AmlCompute", r.Properties)
	}
	if a.Properties == nil {
		t.Fatal("no AmlCompute properties")
	}
	return a
}

func wantResponseError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("want *azcore.ResponseError %d %s, got %T %v", status, code, err, err)
	}
	if re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("got %d %s, want %d %s", re.StatusCode, re.ErrorCode, status, code)
	}
}

func TestComputeLifecycleWithSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const name = "sdk-cluster"
	params := ml.ComputeResource{
		Location: to.Ptr(loc),
		Tags:     map[string]*string{"team": to.Ptr("ml"), "cost-center": to.Ptr("42")},
		Identity: &ml.ManagedServiceIdentity{Type: to.Ptr(ml.ManagedServiceIdentityTypeSystemAssigned)},
		Properties: &ml.AmlCompute{
			ComputeType: to.Ptr(ml.ComputeTypeAmlCompute),
			Description: to.Ptr("made by the Azure SDK"),
			Properties: &ml.AmlComputeProperties{
				VMSize:     to.Ptr("STANDARD_D2_V2"),
				VMPriority: to.Ptr(ml.VMPriorityLowPriority),
				OSType:     to.Ptr(ml.OsTypeLinux),
				ScaleSettings: &ml.ScaleSettings{
					MaxNodeCount: to.Ptr[int32](3), MinNodeCount: to.Ptr[int32](0), NodeIdleTimeBeforeScaleDown: to.Ptr("PT3M"),
				},
				RemoteLoginPortPublicAccess: to.Ptr(ml.RemoteLoginPortPublicAccessDisabled),
				EnableNodePublicIP:          to.Ptr(true),
				IsolatedNetwork:             to.Ptr(true),
			},
		},
	}
	// No provider isolates networks (isolatedNetwork): the SDK sees the
	// refusal as an ARM error naming the field.
	_, err := e.computes.BeginCreateOrUpdate(ctx, rg, ws, name, params, nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 400 || re.ErrorCode != "ValidationError" || !strings.Contains(err.Error(), "isolatedNetwork") {
		t.Fatalf("create with isolatedNetwork true: %v, want a 400 ValidationError", err)
	}
	params.Properties.(*ml.AmlCompute).Properties.IsolatedNetwork = nil
	poller, err := e.computes.BeginCreateOrUpdate(ctx, rg, ws, name, params, nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := poller.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, r ml.ComputeResource) {
		t.Helper()
		a := amlOf(t, r)
		p := a.Properties
		if *r.Name != name || *r.ID != "/subscriptions/"+sub+"/resourceGroups/"+rg+"/providers/Microsoft.MachineLearningServices/workspaces/"+ws+"/computes/"+name ||
			*r.Type != "Microsoft.MachineLearningServices/workspaces/computes" || *r.Location != loc {
			t.Errorf("%s: envelope %s %s %s %s", what, *r.Name, *r.ID, *r.Type, *r.Location)
		}
		if *a.ProvisioningState != ml.ProvisioningStateSucceeded {
			t.Errorf("%s: provisioningState %s", what, *a.ProvisioningState)
		}
		if *p.VMSize != "Standard_D2_v2" || *p.VMPriority != ml.VMPriorityLowPriority || *p.OSType != ml.OsTypeLinux {
			t.Errorf("%s: size %s priority %s os %s", what, *p.VMSize, *p.VMPriority, *p.OSType)
		}
		// enableNodePublicIp left out is Azure's default, true (an answer
		// without it is what azure-ai-ml 1.4.0 can read back and send again).
		if *p.RemoteLoginPortPublicAccess != ml.RemoteLoginPortPublicAccessDisabled || (p.EnableNodePublicIP != nil && !*p.EnableNodePublicIP) {
			t.Errorf("%s: remote login %s public ip %v", what, *p.RemoteLoginPortPublicAccess, p.EnableNodePublicIP)
		}
		if *a.Description != "made by the Azure SDK" || *r.Tags["team"] != "ml" || *r.Tags["cost-center"] != "42" {
			t.Errorf("%s: description %q tags %v", what, *a.Description, r.Tags)
		}
		if r.Identity == nil || *r.Identity.Type != ml.ManagedServiceIdentityTypeSystemAssigned || r.Identity.PrincipalID == nil || *r.Identity.PrincipalID == "" || r.Identity.TenantID == nil {
			t.Errorf("%s: identity %+v", what, r.Identity)
		}
		if a.CreatedOn == nil || a.ModifiedOn == nil || a.IsAttachedCompute == nil || *a.IsAttachedCompute || *p.AllocationState != ml.AllocationStateSteady || *p.CurrentNodeCount != 0 {
			t.Errorf("%s: read-only fields %+v %+v", what, a, p)
		}
	}
	check("PollUntilDone result", created.ComputeResource)
	s := amlOf(t, created.ComputeResource).Properties.ScaleSettings
	if *s.MaxNodeCount != 3 || *s.MinNodeCount != 0 || *s.NodeIdleTimeBeforeScaleDown != "PT3M" {
		t.Errorf("scale settings %+v", s)
	}
	principal := *created.Identity.PrincipalID

	got, err := e.computes.Get(ctx, rg, ws, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got.ComputeResource)
	if got.SystemData == nil || got.SystemData.CreatedAt == nil || *got.SystemData.CreatedBy != "admin" {
		t.Errorf("systemData %+v", got.SystemData)
	}

	// BeginUpdate PATCHes the doubly nested scale settings.
	up, err := e.computes.BeginUpdate(ctx, rg, ws, name, ml.ClusterUpdateParameters{
		Properties: &ml.ClusterUpdateProperties{Properties: &ml.ScaleSettingsInformation{ScaleSettings: &ml.ScaleSettings{
			MaxNodeCount: to.Ptr[int32](6), MinNodeCount: to.Ptr[int32](0), NodeIdleTimeBeforeScaleDown: to.Ptr("PT10M"),
		}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := up.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	check("BeginUpdate result", updated.ComputeResource)
	s = amlOf(t, updated.ComputeResource).Properties.ScaleSettings
	if *s.MaxNodeCount != 6 || *s.NodeIdleTimeBeforeScaleDown != "PT10M" {
		t.Errorf("updated scale %+v", s)
	}
	got, err = e.computes.Get(ctx, rg, ws, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := amlOf(t, got.ComputeResource).Properties.ScaleSettings; *s.MaxNodeCount != 6 {
		t.Errorf("Get after update: %+v", s)
	}
	if *got.Identity.PrincipalID != principal {
		t.Errorf("principal changed on update")
	}

	// A full PUT on the existing compute (how az ml updates) is a 200.
	params.Properties.(*ml.AmlCompute).Description = to.Ptr("made by the Azure SDK")
	params.Properties.(*ml.AmlCompute).Properties.ScaleSettings.MaxNodeCount = to.Ptr[int32](5)
	poller, err = e.computes.BeginCreateOrUpdate(ctx, rg, ws, name, params, nil)
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := poller.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	check("PUT update", replaced.ComputeResource)
	if *replaced.Identity.PrincipalID != principal {
		t.Errorf("principal changed on PUT update")
	}

	nodes := e.computes.NewListNodesPager(rg, ws, name, nil)
	for nodes.More() {
		page, err := nodes.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Nodes) != 0 {
			t.Errorf("nodes %v", page.Nodes)
		}
	}
	if _, err := e.computes.ListKeys(ctx, rg, ws, name, nil); err != nil {
		t.Errorf("ListKeys: %v", err)
	}

	del, err := e.computes.BeginDelete(ctx, rg, ws, name, ml.UnderlyingResourceActionDelete, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = e.computes.Get(ctx, rg, ws, name, nil)
	wantResponseError(t, err, 404, "ResourceNotFound")
	// Deleting again is a no-op (204).
	del, err = e.computes.BeginDelete(ctx, rg, ws, name, ml.UnderlyingResourceActionDelete, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
}

func TestValidationErrorsWithSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mk := func(size string, max int32) ml.ComputeResource {
		return ml.ComputeResource{Properties: &ml.AmlCompute{ComputeType: to.Ptr(ml.ComputeTypeAmlCompute),
			Properties: &ml.AmlComputeProperties{VMSize: to.Ptr(size), ScaleSettings: &ml.ScaleSettings{MaxNodeCount: to.Ptr(max)}}}}
	}
	_, err := e.computes.BeginCreateOrUpdate(ctx, rg, ws, "bad-size", mk("Standard_DS3", 2), nil)
	wantResponseError(t, err, 400, "ValidationError")
	if !strings.Contains(err.Error(), "Standard_DS3_v2") {
		t.Errorf("error does not suggest Standard_DS3_v2: %v", err)
	}
	_, err = e.computes.BeginCreateOrUpdate(ctx, rg, ws, "cluster-1", mk("Standard_DS3_v2", 2), nil)
	wantResponseError(t, err, 400, "InvalidResourceName")
	_, err = e.computes.BeginCreateOrUpdate(ctx, rg, ws, "no-ws", mk("Standard_DS3_v2", 2), nil)
	if err != nil {
		t.Fatalf("valid create: %v", err)
	}
	_, err = e.computes.BeginCreateOrUpdate(ctx, rg, "missing-ws", "c1", mk("Standard_DS3_v2", 2), nil)
	wantResponseError(t, err, 404, "ParentResourceNotFound")
	_, err = e.computes.BeginUpdate(ctx, rg, ws, "no-ws", ml.ClusterUpdateParameters{Properties: &ml.ClusterUpdateProperties{
		Properties: &ml.ScaleSettingsInformation{ScaleSettings: &ml.ScaleSettings{MaxNodeCount: to.Ptr[int32](0)}}}}, nil)
	wantResponseError(t, err, 400, "ValidationError")
	_, err = e.computes.Get(ctx, rg, ws, "bad-size", nil)
	wantResponseError(t, err, 404, "ResourceNotFound")
}

func TestListPagerFollowsNextLink(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// More computes than the default page size (100), made over plain HTTP.
	const n = 103
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			u := fmt.Sprintf("%s/subscriptions/%s/resourceGroups/%s/providers/Microsoft.MachineLearningServices/workspaces/%s/computes/c%03d?api-version=2024-04-01", e.d.URL, sub, rg, ws, i)
			req, _ := http.NewRequest("PUT", u, strings.NewReader(`{"properties":{"computeType":"AmlCompute"}}`))
			req.Header.Set("Authorization", "Bearer "+e.d.Token)
			res, err := e.http.Do(req)
			if err != nil {
				errs <- err
				return
			}
			res.Body.Close()
			if res.StatusCode != 201 {
				errs <- fmt.Errorf("PUT %d: %d", i, res.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	pager := e.computes.NewListPager(rg, ws, nil)
	seen := map[string]bool{}
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, c := range page.Value {
			if seen[*c.Name] {
				t.Errorf("%s listed twice", *c.Name)
			}
			seen[*c.Name] = true
			amlOf(t, *c)
		}
	}
	if len(seen) != n || pages < 2 {
		t.Errorf("listed %d computes in %d pages, want %d in at least 2", len(seen), pages, n)
	}
}

func TestWorkspacesUsagesSizesWithSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w, err := e.ws.Get(ctx, rg, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *w.Name != ws || *w.Location != loc || w.Properties == nil || *w.Properties.ProvisioningState != ml.ProvisioningStateSucceeded {
		t.Errorf("workspace %+v", w)
	}
	count := 0
	byRG := e.ws.NewListByResourceGroupPager(rg, nil)
	for byRG.More() {
		page, err := byRG.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		count += len(page.Value)
	}
	bySub := e.ws.NewListBySubscriptionPager(nil)
	subCount := 0
	for bySub.More() {
		page, err := bySub.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		subCount += len(page.Value)
	}
	if count != 1 || subCount != 1 {
		t.Errorf("workspaces: %d in the resource group, %d in the subscription", count, subCount)
	}
	_, err = e.ws.Get(ctx, rg, "nope-ws", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("missing workspace: %v", err)
	}

	usages := e.usages.NewListPager(loc, nil)
	rows := 0
	for usages.More() {
		page, err := usages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Value {
			rows++
			if u.Name == nil || u.Name.Value == nil || u.Limit == nil || u.CurrentValue == nil || u.Unit == nil || *u.Unit != ml.UsageUnitCount {
				t.Errorf("usage %+v", u)
			}
		}
	}
	if rows < 3 {
		t.Errorf("%d usage rows", rows)
	}

	sizes, err := e.sizes.List(ctx, loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes.Value) < 20 {
		t.Errorf("%d VM sizes", len(sizes.Value))
	}
	for _, s := range sizes.Value {
		if s.Name == nil || s.VCPUs == nil || s.EstimatedVMPrices == nil || len(s.EstimatedVMPrices.Values) == 0 ||
			*s.EstimatedVMPrices.BillingCurrency != ml.BillingCurrencyUSD || *s.EstimatedVMPrices.UnitOfMeasure != ml.UnitOfMeasureOneHour {
			t.Errorf("size %+v", s)
			continue
		}
		for _, p := range s.EstimatedVMPrices.Values {
			if p.RetailPrice == nil || *p.RetailPrice <= 0 || p.VMTier == nil || p.OSType == nil {
				t.Errorf("size %s price %+v", *s.Name, p)
			}
		}
	}

	quotas := e.quotas.NewListPager(loc, nil)
	qrows := 0
	for quotas.More() {
		page, err := quotas.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		qrows += len(page.Value)
	}
	if qrows < 3 {
		t.Errorf("%d quota rows", qrows)
	}
	res, err := e.quotas.Update(ctx, loc, ml.QuotaUpdateParameters{Location: to.Ptr(loc), Value: []*ml.QuotaBaseProperties{
		{ID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.MachineLearningServices/locations/" + loc + "/quotas/standardDSv2Family"), Limit: to.Ptr[int64](64), Unit: to.Ptr(ml.QuotaUnitCount)},
		{ID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.MachineLearningServices/locations/" + loc + "/quotas/NoSuchFamily"), Limit: to.Ptr[int64](8)},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Value) != 2 || *res.Value[0].Status != ml.StatusSuccess || *res.Value[1].Status != ml.StatusInvalidVMFamilyName {
		t.Errorf("updateQuotas %+v", res.Value)
	}
}
