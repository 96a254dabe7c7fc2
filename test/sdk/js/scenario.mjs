// The compute scenario with the official JavaScript SDK,
// @azure/arm-machinelearning, at its default api-version; only the
// credential and the endpoint (CUMULUS_ENDPOINT, from 'cumulus sdk env') are
// Cumulus's. Node trusts the server's certificate through
// NODE_EXTRA_CA_CERTS. Prints one line per step; exits non-zero on the
// first failure.
import { execFileSync } from "node:child_process";
import assert from "node:assert/strict";
import { AzureMachineLearningWorkspaces } from "@azure/arm-machinelearning";

// A TokenCredential handing out the token 'cumulus sdk token' prints.
const token = process.env.CUMULUS_TOKEN || execFileSync("cumulus", ["sdk", "token"], { encoding: "utf8" }).trim();
const credential = { getToken: async () => ({ token, expiresOnTimestamp: Date.now() + 3600_000 }) };

const sub = process.env.AZURE_SUBSCRIPTION_ID;
const rg = process.env.AZURE_RESOURCE_GROUP;
const ws = process.env.AZUREML_WORKSPACE_NAME;
const prefix = process.env.SCENARIO_PREFIX || "js";
const client = new AzureMachineLearningWorkspaces(credential, sub, { endpoint: process.env.CUMULUS_ENDPOINT });
console.log("api-version", client.apiVersion);

const w0 = await client.workspaces.get(rg, ws);
const location = w0.location;
const w = await client.workspaces.beginUpdateAndWait(rg, ws, { description: "from the JavaScript SDK", tags: { sdk: "js" } });
assert.equal(w.description, "from the JavaScript SDK");
console.log("workspace updated");

const cluster = (vmSize, lo, hi, idle, vmPriority, tags) => ({
  location, tags,
  properties: { computeType: "AmlCompute", properties: { vmSize, vmPriority, scaleSettings: { minNodeCount: lo, maxNodeCount: hi, nodeIdleTimeBeforeScaleDown: idle } } },
});
await client.computeOperations.beginCreateOrUpdateAndWait(rg, ws, `${prefix}-cpu`, cluster("STANDARD_DS3_V2", 0, 4, "PT120S", "Dedicated", { team: "research" }), { updateIntervalInMs: 500 });
await client.computeOperations.beginCreateOrUpdateAndWait(rg, ws, `${prefix}-gpu`, cluster("STANDARD_NC6S_V3", 0, 2, "PT300S", "Dedicated", { gpu: "v100" }), { updateIntervalInMs: 500 });
await client.computeOperations.beginCreateOrUpdateAndWait(rg, ws, `${prefix}-low`, cluster("STANDARD_DS3_V2", 0, 8, "PT120S", "LowPriority", { cost: "low" }), { updateIntervalInMs: 500 });
console.log("created");

const c = await client.computeOperations.get(rg, ws, `${prefix}-cpu`);
assert.equal(c.properties.computeType, "AmlCompute");
assert.equal(c.properties.properties.scaleSettings.maxNodeCount, 4);
assert.equal(c.tags.team, "research");
console.log("get", c.name, c.properties.provisioningState);

const names = [];
for await (const x of client.computeOperations.list(rg, ws)) names.push(x.name);
for (const s of ["-cpu", "-gpu", "-low"]) assert.ok(names.includes(prefix + s), names.join(","));
console.log("list", names.length);

await client.computeOperations.beginUpdateAndWait(rg, ws, `${prefix}-cpu`,
  { properties: { scaleSettings: { minNodeCount: 0, maxNodeCount: 6, nodeIdleTimeBeforeScaleDown: "PT600S" } } }, { updateIntervalInMs: 500 });
const s = (await client.computeOperations.get(rg, ws, `${prefix}-cpu`)).properties.properties.scaleSettings;
assert.equal(s.maxNodeCount, 6);
assert.equal(s.nodeIdleTimeBeforeScaleDown, "PT600S");
console.log("updated");

const keys = await client.computeOperations.listKeys(rg, ws, `${prefix}-cpu`);
assert.equal(keys.computeType, "VirtualMachine");
console.log("listKeys", keys.computeType);

const sizes = await client.virtualMachineSizes.list(location);
assert.ok(sizes.value.some((v) => v.name.toLowerCase() === "standard_ds3_v2"));
console.log("sizes", sizes.value.length);
const usage = [];
for await (const u of client.usages.list(location)) usage.push(u);
assert.ok(usage.length > 0);
console.log("usage", usage.length);

// An unsupported call answers as Azure does: a RestError with the ARM code.
try {
  await client.computeOperations.beginStartAndWait(rg, ws, `${prefix}-cpu`);
  throw new Error("start of an AmlCompute succeeded");
} catch (e) {
  assert.equal(e.statusCode, 400, String(e));
  console.log("unsupported", e.statusCode, e.code);
}

if ((process.env.SCENARIO_JOB || "1") === "1") {
  // Cumulus has no curated environments: register the one the job names.
  await client.environmentVersions.createOrUpdate(rg, ws, "AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "1", { properties: { image: "python:3.11-slim" } });
  const job = await client.jobs.createOrUpdate(rg, ws, `${prefix}-job`, {
    properties: { jobType: "Command", command: "echo hello from cumulus", environmentId: "azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest", computeId: c.id },
  });
  console.log("job", job.name, job.properties.status);
  await client.jobs.beginCancelAndWait(rg, ws, `${prefix}-job`, { updateIntervalInMs: 500 });
  console.log("job cancelled");
}

for (const n of ["-cpu", "-gpu", "-low"]) {
  await client.computeOperations.beginDeleteAndWait(rg, ws, prefix + n, "Delete", { updateIntervalInMs: 500 });
}
console.log("deleted");
console.log("OK");
