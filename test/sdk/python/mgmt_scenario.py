"""The compute scenario with Python azure-mgmt-machinelearningservices at its
default api-version; only the credential and the endpoint (base_url from
CUMULUS_ENDPOINT, set by 'cumulus sdk env') are Cumulus's. Prints one line
per step; exits non-zero on the first failure."""

import os
import subprocess
import time

from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.mgmt.machinelearningservices import MachineLearningServicesMgmtClient
from azure.mgmt.machinelearningservices.models import (
    AmlCompute, AmlComputeProperties, ComputeResource, ScaleSettings, ClusterUpdateParameters,
    ScaleSettingsInformation, WorkspaceUpdateParameters,
    CommandJob, JobBase, EnvironmentVersion, EnvironmentVersionProperties,
)


class CumulusCredential:
    """A TokenCredential handing out the token 'cumulus sdk token' prints."""

    def __init__(self):
        self._token = os.environ.get("CUMULUS_TOKEN") or subprocess.check_output(
            ["cumulus", "sdk", "token"], text=True).strip()

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self._token, int(time.time()) + 3600)


sub = os.environ["AZURE_SUBSCRIPTION_ID"]
rg = os.environ["AZURE_RESOURCE_GROUP"]
ws = os.environ["AZUREML_WORKSPACE_NAME"]
client = MachineLearningServicesMgmtClient(CumulusCredential(), sub, base_url=os.environ["CUMULUS_ENDPOINT"])
prefix = os.environ.get("SCENARIO_PREFIX", "mg")
print("api-version", client._config.api_version)

w = client.workspaces.get(rg, ws)
location = w.location
w = client.workspaces.begin_update(rg, ws, WorkspaceUpdateParameters(description="from the management SDK", tags={"sdk": "python"})).result()
assert w.description == "from the management SDK", w.description
print("workspace updated")


def cluster(size, lo, hi, idle, priority, tags):
    return ComputeResource(location=location, tags=tags, properties=AmlCompute(properties=AmlComputeProperties(
        vm_size=size, vm_priority=priority,
        scale_settings=ScaleSettings(min_node_count=lo, max_node_count=hi, node_idle_time_before_scale_down=idle))))


client.compute.begin_create_or_update(rg, ws, prefix + "-cpu", cluster("STANDARD_DS3_V2", 0, 4, "PT120S", "Dedicated", {"team": "research"})).result()
client.compute.begin_create_or_update(rg, ws, prefix + "-gpu", cluster("STANDARD_NC6S_V3", 0, 2, "PT300S", "Dedicated", {"gpu": "v100"})).result()
client.compute.begin_create_or_update(rg, ws, prefix + "-low", cluster("STANDARD_DS3_V2", 0, 8, "PT120S", "LowPriority", {"cost": "low"})).result()
print("created")

c = client.compute.get(rg, ws, prefix + "-cpu")
assert isinstance(c.properties, AmlCompute), type(c.properties)
assert c.properties.properties.scale_settings.max_node_count == 4
assert c.tags.get("team") == "research", c.tags
assert client.compute.get(rg, ws, prefix + "-low").properties.properties.vm_priority == "LowPriority"
print("get", c.name, c.properties.provisioning_state)

names = [x.name for x in client.compute.list(rg, ws)]
assert all(prefix + s in names for s in ("-cpu", "-gpu", "-low")), names
print("list", len(names))

client.compute.begin_update(rg, ws, prefix + "-cpu", ClusterUpdateParameters(
    properties=ScaleSettingsInformation(scale_settings=ScaleSettings(min_node_count=0, max_node_count=6, node_idle_time_before_scale_down="PT600S")))).result()
s = client.compute.get(rg, ws, prefix + "-cpu").properties.properties.scale_settings
assert (s.max_node_count, s.node_idle_time_before_scale_down.total_seconds()) == (6, 600), s
print("updated")

keys = client.compute.list_keys(rg, ws, prefix + "-cpu")
assert keys.compute_type == "VirtualMachine", keys.compute_type
print("listKeys", type(keys).__name__)

sizes = client.virtual_machine_sizes.list(location)
assert any(v.name.lower() == "standard_ds3_v2" for v in sizes.value)
print("sizes", len(sizes.value))
usage = list(client.usages.list(location))
assert usage
print("usage", len(usage))

# An unsupported call answers as Azure does: the error names the code.
try:
    client.compute.begin_start(rg, ws, prefix + "-cpu").result()
    raise SystemExit("start of an AmlCompute succeeded")
except HttpResponseError as e:
    print("unsupported", e.status_code, e.error.code if e.error else None)

if os.environ.get("SCENARIO_JOB", "1") == "1":
    # Cumulus has no curated environments: register the one the job names.
    client.environment_versions.create_or_update(rg, ws, "AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "1",
        EnvironmentVersion(properties=EnvironmentVersionProperties(image="python:3.11-slim")))
    job = JobBase(properties=CommandJob(
        command="echo hello from cumulus",
        environment_id="azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest",
        compute_id=c.id))
    created = client.jobs.begin_create_or_update(rg, ws, prefix + "-job", job) if hasattr(client.jobs, "begin_create_or_update") else client.jobs.create_or_update(rg, ws, prefix + "-job", job)
    print("job", created.name, created.properties.status)
    client.jobs.begin_cancel(rg, ws, prefix + "-job").result()
    print("job cancelled")

for n in ("-cpu", "-gpu", "-low"):
    client.compute.begin_delete(rg, ws, prefix + n, underlying_resource_action="Delete").result()
print("deleted")
print("OK")
