/**
 * The CDK app: `npx cdk synth` (or deploy) from the repository root with infra/cdk.json.
 * Context: `-c policy=FILE` (default the seed's cloudfront.yaml), `-c origin=DOMAIN`,
 * `-c replicas=eu-west-1,ap-southeast-1` (default `DEFAULT_REPLICA_REGIONS`; `-c replicas=` for
 * a single region). The synth warns for each Lambda@Edge region whose nearest replica is farther
 * than the policy's budget. A policy with `counting: hybrid` rules on a global table gets a
 * single-region table for their reservations (`-c leaseTable=NAME`, default
 * `rate-limit-leases`; `-c leaseTable=` puts them in the global table), and with
 * `-c regionAllowance=true` the store's region holders and allowances, in the global table
 * (docs/aws.md). A policy with an
 * `overrides:` section builds a viewer-request function that reads operators' overrides, and
 * its role may then run BatchGetItem too.
 * EDGELIMIT_JWT_SECRET and EDGELIMIT_CHALLENGE_SECRET must be set: Lambda@Edge has no environment
 * variables, so the secrets are bundled at build time (see docs/aws.md for the Secrets Manager
 * alternative). A policy that challenges without challenge.secret is refused.
 */
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { buildLambdaEdge } from "../src/cli/build.js";
import { loadPolicy } from "../src/policy/load.js";
import { bundledStore, DEFAULT_REPLICA_REGIONS, EdgeRateLimitStack } from "./stack.js";

const app = new App();
const policyFile =
  (app.node.tryGetContext("policy") as string | undefined) ?? "examples/policies/cloudfront.yaml";
const replicasContext = app.node.tryGetContext("replicas") as string | undefined;
const replicaRegions =
  replicasContext === undefined
    ? [...DEFAULT_REPLICA_REGIONS]
    : replicasContext
        .split(",")
        .map((region) => region.trim())
        .filter(Boolean);
const tableName = (app.node.tryGetContext("table") as string | undefined) ?? "rate-limits";
const bundleDir = join(app.outdir, "edgelimit-functions");

const policy = loadPolicy(policyFile);
const { store, leaseTableName } = bundledStore({
  tableName,
  replicaRegions,
  hybrid: policy.rules.some((rule) => rule.counting === "hybrid"),
  leaseTable: app.node.tryGetContext("leaseTable") as string | undefined,
  regionAllowance: app.node.tryGetContext("regionAllowance") === "true",
});
const built = await buildLambdaEdge({ policy, store, outDir: bundleDir });
const zipOf = (name: string) => built.find((fn) => fn.name === name)?.zip as string;

new EdgeRateLimitStack(app, "EdgelimitRateLimit", {
  viewerRequestZip: zipOf("viewer-request"),
  viewerResponseZip: zipOf("viewer-response"),
  tableName,
  replicaRegions,
  leaseTableName,
  // The build decides (on for a policy with an `overrides:` section); the role follows it.
  readsOverrides: built.some((fn) => fn.overrides),
  budgetMs: policy.budgetMs,
  originDomain: (app.node.tryGetContext("origin") as string | undefined) ?? "origin.example.com",
});
app.synth();
