"""The compute scenario with Python azure-ai-ml (MLClient), as an Azure user
writes it; only the credential and the endpoint (AZUREML_DEV_URL_MFE, set by
'cumulus sdk env') are Cumulus's. Prints one line per step; exits non-zero
on the first failure."""

import os
import subprocess
import time

import azure.ai.ml
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.ai.ml import MLClient, command
from azure.ai.ml.entities import AmlCompute, Environment


class CumulusCredential:
    """A TokenCredential handing out the token 'cumulus sdk token' prints."""

    def __init__(self):
        self._token = os.environ.get("CUMULUS_TOKEN") or subprocess.check_output(
            ["cumulus", "sdk", "token"], text=True).strip()

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self._token, int(time.time()) + 3600)


ml_client = MLClient(
    CumulusCredential(),
    subscription_id=os.environ["AZURE_SUBSCRIPTION_ID"],
    resource_group_name=os.environ["AZURE_RESOURCE_GROUP"],
    workspace_name=os.environ["AZUREML_WORKSPACE_NAME"],
)
prefix = os.environ.get("SCENARIO_PREFIX", "py")

# Create a CPU cluster, a GPU cluster and a low-priority cluster, with tags.
cpu = AmlCompute(
    name=prefix + "-cpu",
    type="amlcompute",
    size="STANDARD_DS3_V2",
    min_instances=0,
    max_instances=4,
    idle_time_before_scale_down=120,
    tags={"team": "research"},
)
ml_client.compute.begin_create_or_update(cpu).result()
gpu = AmlCompute(
    name=prefix + "-gpu",
    type="amlcompute",
    size="STANDARD_NC6S_V3",
    min_instances=0,
    max_instances=2,
    idle_time_before_scale_down=300,
    tags={"team": "vision", "gpu": "v100"},
)
ml_client.compute.begin_create_or_update(gpu).result()
low = AmlCompute(
    name=prefix + "-low",
    size="STANDARD_DS3_V2",
    min_instances=0,
    max_instances=8,
    tier="low_priority",
    tags={"cost": "low"},
)
ml_client.compute.begin_create_or_update(low).result()
print("created")

got = ml_client.compute.get(prefix + "-cpu")
assert got.size.lower() == "standard_ds3_v2", got.size
assert got.max_instances == 4 and got.min_instances == 0, (got.min_instances, got.max_instances)
assert got.idle_time_before_scale_down == 120, got.idle_time_before_scale_down
# azure-ai-ml before 1.5 leaves tags out of the compute it sends (its
# AmlCompute._to_rest_object has no tags); later versions send them.
if tuple(int(x) for x in azure.ai.ml.__version__.split(".")[:2]) >= (1, 5):
    assert got.tags.get("team") == "research", got.tags
assert ml_client.compute.get(prefix + "-low").tier.lower().replace("_", "") == "lowpriority"
print("get", got.name, got.provisioning_state)

names = [c.name for c in ml_client.compute.list()]
for n in (prefix + "-cpu", prefix + "-gpu", prefix + "-low"):
    assert n in names, names
print("list", len(names))

# Update min/max/idle.
got.min_instances = 1
got.max_instances = 6
got.idle_time_before_scale_down = 600
ml_client.compute.begin_update(got).result()
got = ml_client.compute.get(prefix + "-cpu")
assert (got.min_instances, got.max_instances, got.idle_time_before_scale_down) == (1, 6, 600), \
    (got.min_instances, got.max_instances, got.idle_time_before_scale_down)
got.min_instances = 0
ml_client.compute.begin_update(got).result()
print("updated")

sizes = ml_client.compute.list_sizes()
assert any(s.name.lower() == "standard_ds3_v2" for s in sizes)
print("sizes", len(list(sizes)))
usage = list(ml_client.compute.list_usage())
assert usage, "no usage"
print("usage", len(usage))

# An unsupported call answers as Azure does: the error carries the ARM code.
try:
    ml_client.compute.begin_start(prefix + "-cpu").result()
    raise SystemExit("start of an AmlCompute succeeded")
except HttpResponseError as e:
    print("unsupported", e.status_code, e.error.code if e.error else None)

if os.environ.get("SCENARIO_JOB", "1") == "1":
    # Cumulus has no curated environments: register the one the job names.
    ml_client.environments.create_or_update(Environment(
        name="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", version="1", image="python:3.11-slim"))
    job = command(
        command="echo hello from cumulus",
        environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest",
        compute=prefix + "-cpu",
        display_name="hello",
    )
    created = ml_client.jobs.create_or_update(job)
    print("job", created.name, created.status)
    seen = ml_client.jobs.get(created.name)
    assert seen.name == created.name
    ml_client.jobs.begin_cancel(created.name).result()
    print("job cancelled")

for n in (prefix + "-cpu", prefix + "-gpu", prefix + "-low"):
    ml_client.compute.begin_delete(n).result()
names = [c.name for c in ml_client.compute.list()]
assert not any(n.startswith(prefix + "-") for n in names), names
print("deleted")
print("OK")
