import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EdgeRateLimitStack } from "../../infra/stack.js";
import { buildLambdaEdge } from "../../src/cli/build.js";
import { loadPolicy } from "../../src/policy/load.js";

const work = mkdtempSync(join(tmpdir(), "edgelimit-infra-"));
let template: Template;

beforeAll(async () => {
  const built = await buildLambdaEdge({
    policy: loadPolicy("examples/policies/cloudfront.yaml"),
    store: {
      table: "rate-limits",
      region: "us-east-1",
      globalRegions: ["us-east-1", "eu-west-1", "ap-southeast-1", "sa-east-1"],
    },
    outDir: join(work, "functions"),
    env: { EDGELIMIT_JWT_SECRET: "synth-secret" },
  });
  const app = new App({ outdir: join(work, "cdk.out") });
  const stack = new EdgeRateLimitStack(app, "EdgelimitRateLimit", {
    env: { account: "111111111111" },
    viewerRequestZip: built.find((fn) => fn.name === "viewer-request")?.zip as string,
    viewerResponseZip: built.find((fn) => fn.name === "viewer-response")?.zip as string,
    originDomain: "origin.example.com",
  });
  template = Template.fromStack(stack);
}, 60_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe("the CDK stack synthesises offline", () => {
  it("declares the seed's table: PK/SK, TTL on ttl, on-demand, replicas in three regions", () => {
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
        ["eu-west-1", "ap-southeast-1", "sa-east-1", "us-east-1"].map((region) =>
          Match.objectLike({ Region: region }),
        ),
      ),
    });
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
    for (const region of ["us-east-1", "eu-west-1", "ap-southeast-1", "sa-east-1"]) {
      expect(resources).toContain(`:dynamodb:${region}:`);
    }
    expect(resources).not.toContain("*");
    expect(dynamo[0]?.Resource).toHaveLength(4);
    // The viewer-response function's role has no DynamoDB access at all.
    expect(policies).toHaveLength(1);
  });
});
