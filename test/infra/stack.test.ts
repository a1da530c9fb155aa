import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledStore, DEFAULT_REPLICA_REGIONS, EdgeRateLimitStack } from "../../infra/stack.js";
import { buildLambdaEdge } from "../../src/cli/build.js";
import { definePolicy, loadPolicy } from "../../src/policy/load.js";

const work = mkdtempSync(join(tmpdir(), "edgelimit-infra-"));
const tableRegions = ["us-east-1", ...DEFAULT_REPLICA_REGIONS];
let template: Template;
let zips: { viewerRequestZip: string; viewerResponseZip: string };

beforeAll(async () => {
  const built = await buildLambdaEdge({
    policy: loadPolicy("examples/policies/cloudfront.yaml"),
    store: {
      table: "rate-limits",
      region: "us-east-1",
      globalRegions: tableRegions,
    },
    outDir: join(work, "functions"),
    env: { EDGELIMIT_JWT_SECRET: "synth-secret", EDGELIMIT_CHALLENGE_SECRET: "synth-challenge" },
  });
  zips = {
    viewerRequestZip: built.find((fn) => fn.name === "viewer-request")?.zip as string,
    viewerResponseZip: built.find((fn) => fn.name === "viewer-response")?.zip as string,
  };
  template = Template.fromStack(stackWith({}));
}, 60_000);

let stacks = 0;
function stackWith(props: {
  replicaRegions?: readonly string[];
  budgetMs?: number;
  leaseTableName?: string;
  readsOverrides?: boolean;
}) {
  const app = new App({ outdir: join(work, `cdk.out.${stacks++}`) });
  return new EdgeRateLimitStack(app, "EdgelimitRateLimit", {
    env: { account: "111111111111" },
    ...zips,
    originDomain: "origin.example.com",
    ...props,
  });
}

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe("the CDK stack synthesises offline", () => {
  it("declares the seed's table: PK/SK, TTL on ttl, on-demand, replicas in eight regions", () => {
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", 1);
    template.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
      TableName: "rate-limits",
      KeySchema: [
        { AttributeName: "PK", KeyType: "HASH" },
        { AttributeName: "SK", KeyType: "RANGE" },
      ],
      BillingMode: "PAY_PER_REQUEST",
      TimeToLiveSpecification: { AttributeName: "ttl", Enabled: true },
      Replicas: Match.arrayWith(
        [...DEFAULT_REPLICA_REGIONS, "us-east-1"].map((region) =>
          Match.objectLike({ Region: region }),
        ),
      ),
    });
    const [table] = Object.values(template.findResources("AWS::DynamoDB::GlobalTable"));
    expect(table?.Properties.Replicas).toHaveLength(8);
  });

  it("creates both functions on Node 22 with index.handler", () => {
    const functions = template.findResources("AWS::Lambda::Function");
    expect(Object.keys(functions)).toHaveLength(2);
    for (const fn of Object.values(functions)) {
      expect(fn.Properties).toMatchObject({
        Runtime: "nodejs22.x",
        Handler: "index.handler",
        MemorySize: 128,
      });
    }
  });

  it("associates them with the distribution as viewer-request and viewer-response", () => {
    template.hasResourceProperties("AWS::CloudFront::Distribution", {
      DistributionConfig: Match.objectLike({
        DefaultCacheBehavior: Match.objectLike({
          LambdaFunctionAssociations: [
            Match.objectLike({ EventType: "viewer-request", IncludeBody: true }),
            Match.objectLike({ EventType: "viewer-response" }),
          ],
        }),
      }),
    });
  });

  it("grants only the store's item operations, only on the table and its replicas", () => {
    const policies = Object.values(template.findResources("AWS::IAM::Policy"));
    const statements = policies.flatMap(
      (policy) =>
        (policy.Properties.PolicyDocument.Statement as {
          Action: string | string[];
          Resource: unknown;
        }[]) ?? [],
    );
    const dynamo = statements.filter((statement) =>
      JSON.stringify(statement.Action).includes("dynamodb"),
    );
    expect(dynamo).toHaveLength(1);
    expect(dynamo[0]?.Action).toEqual([
      "dynamodb:GetItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]);
    const resources = JSON.stringify(dynamo[0]?.Resource);
    for (const region of tableRegions) {
      expect(resources).toContain(`:dynamodb:${region}:`);
    }
    expect(resources).not.toContain("*");
    expect(dynamo[0]?.Resource).toHaveLength(8);
    // The viewer-response function's role has no DynamoDB access at all.
    expect(policies).toHaveLength(1);
  });
});

describe("a viewer-request bundle that reads operators' overrides", () => {
  it("may also run BatchGetItem, on the rate-limit table and its replicas only (not the lease table)", () => {
    const stack = Template.fromStack(
      stackWith({ readsOverrides: true, leaseTableName: "rate-limit-leases" }),
    );
    const statements = Object.values(stack.findResources("AWS::IAM::Policy")).flatMap(
      (policy) =>
        policy.Properties.PolicyDocument.Statement as { Action: unknown; Resource: unknown[] }[],
    );
    const batch = statements.filter((statement) =>
      JSON.stringify(statement.Action).includes("BatchGetItem"),
    );
    expect(batch).toHaveLength(1);
    expect(batch[0]?.Action).toBe("dynamodb:BatchGetItem");
    expect(batch[0]?.Resource).toHaveLength(8);
    const resources = JSON.stringify(batch[0]?.Resource);
    for (const region of tableRegions) expect(resources).toContain(`:dynamodb:${region}:`);
    expect(resources).not.toContain("LeaseTable");
    // Nothing else is added: the version's GetItem is one of the store's operations already.
    expect(statements.map((statement) => statement.Action)).toEqual([
      ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"],
      "dynamodb:BatchGetItem",
    ]);
  });
});

describe("hybrid counting's reservations", () => {
  it("get a table of their own in us-east-1 only, which the viewer-request function may write", () => {
    const leases = Template.fromStack(stackWith({ leaseTableName: "rate-limit-leases" }));
    leases.resourceCountIs("AWS::DynamoDB::GlobalTable", 2);
    const tables = Object.values(leases.findResources("AWS::DynamoDB::GlobalTable"));
    const lease = tables.find((table) => table.Properties.TableName === "rate-limit-leases");
    expect(lease?.Properties.Replicas).toHaveLength(1);
    expect(lease?.Properties.TimeToLiveSpecification).toEqual({
      AttributeName: "ttl",
      Enabled: true,
    });
    const statements = Object.values(leases.findResources("AWS::IAM::Policy")).flatMap(
      (policy) => policy.Properties.PolicyDocument.Statement as { Resource: unknown[] }[],
    );
    const resources = statements.flatMap((statement) => statement.Resource);
    expect(resources).toHaveLength(9);
    expect(JSON.stringify(resources)).toContain("LeaseTable");
  });
});

describe("the stack warns when an edge region's nearest replica is far for the budget", () => {
  it("warns for nothing with the default replicas and the default 50 ms budget", () => {
    expect(Annotations.fromStack(stackWith({})).findWarning("*", Match.anyValue())).toEqual([]);
  });

  it("names the region, the replica and the round trip for each region beyond the budget", () => {
    const annotations = Annotations.fromStack(
      stackWith({ replicaRegions: ["eu-west-1", "ap-southeast-1", "sa-east-1"] }),
    );
    const warnings = annotations
      .findWarning("*", Match.anyValue())
      .map((found) => String(found.entry.data));
    const far = warnings.map((warning) => /Lambda@Edge in (\S+) writes/.exec(warning)?.[1]);
    expect(far.sort()).toEqual(
      [
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-south-1",
        "ap-southeast-2",
        "us-west-1",
        "us-west-2",
      ].sort(),
    );
    annotations.hasWarning(
      "*",
      Match.stringLikeRegexp(
        "Lambda@Edge in ap-southeast-2 writes to the replica in ap-southeast-1, about 95 ms away: more than the policy's 50 ms budget",
      ),
    );
  });

  it("follows the policy's budget", () => {
    const warnings = (budgetMs: number) =>
      Annotations.fromStack(stackWith({ replicaRegions: [], budgetMs })).findWarning(
        "*",
        Match.anyValue(),
      );
    // A single region (us-east-1): Singapore 215 ms and Sydney 195 ms away, Ohio 10 ms.
    expect(warnings(50)).toHaveLength(11);
    expect(warnings(190)).toHaveLength(2);
    expect(warnings(250)).toHaveLength(0);
  });
});

describe("the app's store settings (infra/app.ts's context)", () => {
  const base = { tableName: "rate-limits", replicaRegions: ["eu-west-1"] };

  it("reserves hybrid rules in a lease table of their own unless told the global table", () => {
    expect(bundledStore({ ...base, hybrid: true })).toEqual({
      store: {
        table: "rate-limits",
        region: "us-east-1",
        globalRegions: ["us-east-1", "eu-west-1"],
        leaseRegion: "us-east-1",
        leaseTable: "rate-limit-leases",
      },
      leaseTableName: "rate-limit-leases",
    });
    expect(bundledStore({ ...base, hybrid: true, leaseTable: "" }).leaseTableName).toBeUndefined();
    expect(bundledStore({ ...base, hybrid: false }).store).not.toHaveProperty("leaseTable");
  });

  it("regionAllowance: region holders and allowances in the global table, whose replicas the role writes; refused without hybrid rules or replicas", async () => {
    const { store } = bundledStore({ ...base, hybrid: true, regionAllowance: true });
    expect(store).toMatchObject({ regionHolder: true, regionAllowance: true });
    expect(store).not.toHaveProperty("holderTable");
    expect(() => bundledStore({ ...base, hybrid: false, regionAllowance: true })).toThrow(
      /regionAllowance: needs a policy with counting: hybrid rules and replicas/,
    );
    expect(() =>
      bundledStore({ ...base, replicaRegions: [], hybrid: true, regionAllowance: true }),
    ).toThrow(/replicas/);
    // The bundle carries the allowances only when the settings ask for them.
    const policy = definePolicy({
      version: 1,
      tiers: { anonymous: { global: { limit: 60, counting: "hybrid" } } },
    });
    const sizeWith = async (settings: typeof store, dir: string) => {
      const [request] = await buildLambdaEdge({
        policy,
        store: settings,
        outDir: join(work, dir),
        env: {},
      });
      return request?.minifiedBytes ?? 0;
    };
    const without = await sizeWith(bundledStore({ ...base, hybrid: true }).store, "plain");
    const withAllowances = await sizeWith(store, "allowances");
    expect(withAllowances).toBeGreaterThan(without + 1000);
  }, 60_000);
});
