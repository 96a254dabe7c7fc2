"""User-assigned identities with Python azure-mgmt-msi, at its default
api-version and at the newest it knows, then attached to a compute with
azure-mgmt-machinelearningservices: what seed documents do with az identity
and a compute's identity block. Only the credential and the endpoint are
Cumulus's. Prints one line per step; exits non-zero on the first failure."""

import os
import subprocess
import time

from azure.core.credentials import AccessToken
from azure.mgmt.msi import ManagedServiceIdentityClient
from azure.mgmt.machinelearningservices import MachineLearningServicesMgmtClient
from azure.mgmt.machinelearningservices.models import (
    AmlCompute, AmlComputeProperties, ComputeResource, ScaleSettings, ManagedServiceIdentity, UserAssignedIdentity,
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
endpoint = os.environ["CUMULUS_ENDPOINT"]
prefix = os.environ.get("SCENARIO_PREFIX", "msi")
location = MachineLearningServicesMgmtClient(CumulusCredential(), sub, base_url=endpoint).workspaces.get(rg, ws).location

made = []
for version in [None, "2022-01-31-preview"]:
    msi = ManagedServiceIdentityClient(CumulusCredential(), sub, api_version=version, base_url=endpoint)
    Identity = ManagedServiceIdentityClient.models(msi._get_api_version("user_assigned_identities")).Identity
    name = "%s-%s" % (prefix, (version or "default").replace("-", ""))
    ident = msi.user_assigned_identities.create_or_update(rg, name, Identity(location=location, tags={"team": "ml"}))
    assert ident.client_id and ident.principal_id and ident.tenant_id, ident
    assert ident.type == "Microsoft.ManagedIdentity/userAssignedIdentities", ident.type
    got = msi.user_assigned_identities.get(rg, name)
    assert got.client_id == ident.client_id and got.tags == {"team": "ml"}, got
    names = [i.name for i in msi.user_assigned_identities.list_by_resource_group(rg)]
    assert name in names, names
    print("identity", msi._get_api_version("user_assigned_identities"), name)
    made.append((msi, ident))

ml = MachineLearningServicesMgmtClient(CumulusCredential(), sub, base_url=endpoint)
ident = made[0][1]
c = ml.compute.begin_create_or_update(rg, ws, prefix + "-uai", ComputeResource(
    location=location,
    identity=ManagedServiceIdentity(type="UserAssigned", user_assigned_identities={ident.id: UserAssignedIdentity()}),
    properties=AmlCompute(properties=AmlComputeProperties(vm_size="STANDARD_DS3_V2",
                                                          scale_settings=ScaleSettings(min_node_count=0, max_node_count=1))))).result()
attached = ml.compute.get(rg, ws, prefix + "-uai").identity.user_assigned_identities
assert list(attached.values())[0].client_id == ident.client_id, attached
print("attached")
ml.compute.begin_delete(rg, ws, prefix + "-uai", underlying_resource_action="Delete").result()
for msi, i in made:
    msi.user_assigned_identities.delete(rg, i.name)
print("deleted")
print("OK")
