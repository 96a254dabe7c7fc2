"""The job half of the Python workflow with azure-ai-ml (MLClient), as an
Azure user writes it, configured only as docs/sdk.md says ('cumulus sdk
env'): a command job with local code and a local data input, a registered
data asset used by name, an output; the job streamed to its end and its
outputs downloaded; a compute fetched, changed and sent back. Then the
pending-upload protocol of newer SDKs with azure-storage-blob's own
ContainerClient.from_container_url, and the refusals: a caller without a
role, and another workspace's SAS. Prints one line per step; exits
non-zero on the first failure."""

import atexit
import contextlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import requests
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.ai.ml import Input, MLClient, Output, command
from azure.ai.ml.constants import AssetTypes
from azure.ai.ml.entities import AmlCompute, Data, NetworkSettings
from azure.ai.ml.sweep import Choice
from azure.storage.blob import ContainerClient


class CumulusCredential:
    """A TokenCredential handing out the token 'cumulus sdk token' prints."""

    def __init__(self, token=None):
        self._token = token or os.environ.get("CUMULUS_TOKEN") or subprocess.check_output(
            ["cumulus", "sdk", "token"], text=True).strip()

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self._token, int(time.time()) + 3600)


sub, rg, wsname = os.environ["AZURE_SUBSCRIPTION_ID"], os.environ["AZURE_RESOURCE_GROUP"], os.environ["AZUREML_WORKSPACE_NAME"]
ml_client = MLClient(CumulusCredential(), subscription_id=sub, resource_group_name=rg, workspace_name=wsname)
prefix = os.environ.get("SCENARIO_PREFIX", "jobs")
endpoint = os.environ["AZUREML_DEV_URL_MFE"]
ws_id = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/{wsname}"

work = pathlib.Path(tempfile.mkdtemp(prefix="cumulus-sdk-jobs-"))
atexit.register(shutil.rmtree, work, ignore_errors=True)
os.chdir(work)
(work / "src").mkdir()
(work / "src" / "train.py").write_text(
    "import os, sys\n"
    "def total(d):\n"
    "    return sum(int(open(os.path.join(d, n)).read()) for n in sorted(os.listdir(d)))\n"
    "data, numbers, out = sys.argv[1], sys.argv[2], sys.argv[3]\n"
    "print('inputs', sorted(os.listdir(data)), sorted(os.listdir(numbers)))\n"
    "os.makedirs(out, exist_ok=True)\n"
    "open(os.path.join(out, 'total.txt'), 'w').write(str(total(data) + total(numbers)))\n"
    "os.makedirs('outputs', exist_ok=True)\n"
    "open('outputs/summary.txt', 'w').write('done')\n"
    "print('total', total(data) + total(numbers))\n")
(work / "src" / "trial.py").write_text(
    "import json, os, ssl, sys, time, urllib.request\n"
    "x = float(sys.argv[1])\n"
    "body = json.dumps({'run_id': os.environ['MLFLOW_RUN_ID'], 'key': 'loss', 'value': x, 'timestamp': int(time.time() * 1000), 'step': 0})\n"
    "req = urllib.request.Request(os.environ['MLFLOW_TRACKING_URI'] + '/api/2.0/mlflow/runs/log-metric', body.encode(),\n"
    "    {'Authorization': 'Bearer ' + os.environ['MLFLOW_TRACKING_TOKEN'], 'Content-Type': 'application/json'})\n"
    "urllib.request.urlopen(req, context=ssl.create_default_context(cafile=os.environ.get('MLFLOW_TRACKING_SERVER_CERT_PATH')))\n"
    "print('trial x =', x)\n")
(work / "data").mkdir()
(work / "data" / "a.txt").write_text("3")
(work / "data" / "b.txt").write_text("4")
(work / "numbers").mkdir()
(work / "numbers" / "n.txt").write_text("100")

# A cluster of one node; fetched, changed and sent back whole.
cpu = prefix + "-cpu"
ml_client.compute.begin_create_or_update(AmlCompute(name=cpu, size="STANDARD_DS3_V2", min_instances=0, max_instances=1,
                                                    idle_time_before_scale_down=120)).result()
got = ml_client.compute.get(cpu)
got.idle_time_before_scale_down = 300
ml_client.compute.begin_create_or_update(got).result()
assert ml_client.compute.get(cpu).idle_time_before_scale_down == 300
print("compute round trip")

# azure-ai-ml 1.4.0's AmlCompute takes network_settings (later versions
# also vnet_name= and subnet_name=): the subnet id it builds reaches the
# server, which keeps it where its provider enforces subnets and refuses
# it, naming it, where not.
try:
    ml_client.compute.begin_create_or_update(AmlCompute(
        name=prefix + "-net", size="STANDARD_DS3_V2", max_instances=1, enable_node_public_ip=False,
        network_settings=NetworkSettings(vnet_name="vnet1", subnet="default"))).result()
    net = ml_client.compute.get(prefix + "-net")
    assert net.network_settings.subnet.endswith("/virtualNetworks/vnet1/subnets/default"), net.network_settings.subnet
    ml_client.compute.begin_delete(prefix + "-net").result()
    print("subnet kept")
except HttpResponseError as e:
    assert "virtualNetworks/vnet1/subnets/default" in str(e), e
    print("subnet refused", e.status_code)

# A data asset, uploaded and registered.
numbers = ml_client.data.create_or_update(Data(name=prefix + "-numbers", path="./numbers", type=AssetTypes.URI_FOLDER))
print("data", numbers.name, numbers.version)

# A job that holds the one node until it is canceled, so that the next
# one is still queued when streaming starts (jobs.stream prints logs only
# while a job is in progress).
blocker = ml_client.jobs.create_or_update(command(command="sleep 600", compute=cpu, environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest"))

job = ml_client.jobs.create_or_update(command(
    code="./src",
    command="python3 train.py ${{inputs.data}} ${{inputs.numbers}} ${{outputs.out}}",
    inputs={"data": Input(type="uri_folder", path="./data"),
            "numbers": Input(type="uri_folder", path=f"azureml:{numbers.name}@latest")},
    outputs={"out": Output(type="uri_folder")},
    environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest",
    compute=cpu,
    display_name="sum"))
print("job", job.name, job.status)

def stream_while_blocked(name, blocker_name):
    """jobs.stream(name), the job held back by blocker_name until streaming
    has begun (the first Run History read cancels the blocker), so that
    the stream sees the job run. Returns what it printed."""
    runs = ml_client.jobs._runs_operations
    details = runs.get_run_details
    first = []

    def details_then_unblock(run_id):
        d = details(run_id)
        if not first:
            first.append(d.status)
            ml_client.jobs.begin_cancel(blocker_name)
        return d

    runs.get_run_details = details_then_unblock
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            ml_client.jobs.stream(name)
    finally:
        runs.get_run_details = details
    assert first and first[0] in ("NotStarted", "Queued", "Preparing", "Starting"), first
    return printed.getvalue()


out = stream_while_blocked(job.name, blocker.name)
assert "total 107" in out, out
assert "curated environments" in out, out
print("streamed", ml_client.jobs.get(job.name).status)

ml_client.jobs.download(job.name, download_path="dl", output_name="out")
assert (work / "dl" / "named-outputs" / "out" / "total.txt").read_text() == "107"
ml_client.jobs.download(job.name, download_path="all", all=True)
assert (work / "all" / "named-outputs" / "out" / "total.txt").read_text() == "107"
assert (work / "all" / "artifacts" / "outputs" / "summary.txt").read_text() == "done"
assert "total 107" in (work / "all" / "artifacts" / "user_logs" / "std_log.txt").read_text()
print("downloaded")


# The pending upload of newer SDKs: the server picks a container and
# hands out its SAS; the storage SDK's ContainerClient uploads to it (in
# blocks for the larger file), then the code version names it.
def arm(method, path, body=None, token=None):
    r = requests.request(method, endpoint + ws_id + path, params={"api-version": "2024-04-01"}, json=body,
                         headers={"Authorization": "Bearer " + (token or CumulusCredential()._token)})
    return r


code_hash = "a" * 64
r = arm("GET", f"/codes/{prefix}-code/versions?hash={code_hash}&hashVersion=202208")
assert r.status_code == 200 and r.json()["value"] == [], r.text
r = arm("POST", f"/codes/{prefix}-code/versions/1/startPendingUpload", {"pendingUploadType": "TemporaryBlobReference"})
assert r.status_code == 200, r.text
ref = r.json()["blobReferenceForConsumption"]
container = ContainerClient.from_container_url(ref["credential"]["sasUri"], max_single_put_size=1024, max_block_size=1024)
container.upload_blob("src/main.py", b"print('from a pending upload')\n")
big = os.urandom(5000)
container.upload_blob("src/weights.bin", big)
try:
    container.upload_blob("src/main.py", b"again")
    raise SystemExit("a second upload without overwrite succeeded")
except HttpResponseError as e:
    assert e.status_code == 409, e
container.get_blob_client("src/main.py").set_blob_metadata({"upload_status": "completed", "name": prefix + "-code", "version": "1"})
props = container.get_blob_client("src/main.py").get_blob_properties()
assert props.metadata.get("upload_status") == "completed", props.metadata
assert container.download_blob("src/weights.bin").readall() == big
assert sorted(b.name for b in container.list_blobs(name_starts_with="src/")) == ["src/main.py", "src/weights.bin"]
r = arm("PUT", f"/codes/{prefix}-code/versions/1", {"properties": {"codeUri": ref["blobUri"] + "/src", "isAnonymous": True,
                                                                   "properties": {"hash_sha256": code_hash, "hash_version": "202208"}}})
assert r.status_code in (200, 201), r.text
r = arm("GET", f"/codes/{prefix}-code/versions?hash={code_hash}&hashVersion=202208")
assert [v["name"] for v in r.json()["value"]] == ["1"], r.text
print("pending upload", len(big))

# The uploaded code runs; a sweep of it streams and downloads too.
coded = ml_client.jobs.create_or_update(command(code=f"{ws_id}/codes/{prefix}-code/versions/1", command="python3 main.py && ls -l weights.bin",
                                                compute=cpu, environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest"))
with contextlib.redirect_stdout(io.StringIO()):
    ml_client.jobs.stream(coded.name)
ml_client.jobs.download(coded.name, download_path="coded")
log = (work / "coded" / "artifacts" / "user_logs" / "std_log.txt").read_text()
assert "from a pending upload" in log and " 5000 " in log, log
print("uploaded code ran")

blocker = ml_client.jobs.create_or_update(command(command="sleep 600", compute=cpu, environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest"))
trial = command(code="./src", command="python3 trial.py ${{inputs.x}}", inputs={"x": 1}, compute=cpu,
                environment="AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest")
sweep = trial(x=Choice([1, 2])).sweep(sampling_algorithm="grid", primary_metric="loss", goal="minimize", compute=cpu)
sweep.set_limits(max_total_trials=2, max_concurrent_trials=1)
sweep = ml_client.jobs.create_or_update(sweep)
out = stream_while_blocked(sweep.name, blocker.name)
assert "Streaming azureml-logs/hyperdrive.txt" in out and sweep.name + "_0" in out, out
ml_client.jobs.download(sweep.name, download_path="swept")
hd = (work / "swept" / "hd-artifacts" / "azureml-logs" / "hyperdrive.txt").read_text()
assert sweep.name + "_1: Completed" in hd, hd
best = (work / "swept" / "artifacts" / "user_logs" / "std_log.txt").read_text()
assert "trial x = 1.0" in best, best  # the best trial's (loss 1 < 2)
print("sweep streamed", ml_client.jobs.get(sweep.name).status)

# Refusals: a caller with no role gets no SAS and no upload container;
# another workspace's SAS does not open this workspace's container.
subprocess.run(["cumulus", "auth", "principal", "create", "--name", prefix + "-norole"], check=True, capture_output=True)
norole = json.loads(subprocess.check_output(["cumulus", "auth", "token", "create", "--principal", prefix + "-norole", "-o", "json"]))["token"]
r = arm("POST", "/datastores/workspaceblobstore/listSecrets", token=norole)
assert r.status_code == 403, (r.status_code, r.text)
r = arm("POST", f"/codes/{prefix}-code/versions/2/startPendingUpload", {"pendingUploadType": "TemporaryBlobReference"}, token=norole)
assert r.status_code == 403, (r.status_code, r.text)
print("no role 403")

subprocess.run(["cumulus", "workspace", "create", "-n", prefix + "-other"], check=True, capture_output=True)
other = MLClient(CumulusCredential(), subscription_id=sub, resource_group_name=rg, workspace_name=prefix + "-other")
other_sas = other.datastores.get("workspaceblobstore", include_secrets=True).credentials.sas_token
mine = ml_client.datastores.get("workspaceblobstore", include_secrets=True)
mine_url = f"https://{mine.account_name}.blob.core.windows.net/{mine.container_name}"
assert list(ContainerClient.from_container_url(mine_url + "?" + mine.credentials.sas_token).list_blobs(name_starts_with="azureml/" + job.name))
try:
    list(ContainerClient.from_container_url(mine_url + "?" + other_sas).list_blobs())
    raise SystemExit("another workspace's SAS listed this workspace's container")
except ClientAuthenticationError as e:
    assert "AuthenticationFailed" in str(e), e
print("other workspace's SAS refused")
print("OK")
