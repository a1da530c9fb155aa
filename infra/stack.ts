import { Annotations, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import * as cloudfront from "aws-cdk-lib/aws-cloudfront";
import * as origins from "aws-cdk-lib/aws-cloudfront-origins";
import { AttributeType, Billing, TableV2 } from "aws-cdk-lib/aws-dynamodb";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import * as lambda from "aws-cdk-lib/aws-lambda";
import { Construct } from "constructs";
import { distantReplicaWarnings } from "../src/adapters/lambda-edge/regions.js";

/**
 * Replicas besides us-east-1 such that every Lambda@Edge region has one within 50 ms (the
 * default decision budget) by the approximate table in src/adapters/lambda-edge/regions.ts:
 * us-east-2 writes to us-east-1, us-west-1 to us-west-2, eu-west-2 and eu-central-1 to
 * eu-west-1, ap-northeast-2 to ap-northeast-1, the others in-region. Eight regions cost about
 * twice the writes of four (docs/aws.md, "Choosing the replicas").
 */
export const DEFAULT_REPLICA_REGIONS = [
  "us-west-2",
  "sa-east-1",
  "eu-west-1",
  "ap-south-1",
  "ap-southeast-1",
  "ap-southeast-2",
  "ap-northeast-1",
] as const;

/**
 * The store settings the app bundles (`edgelimit build`'s `store`) and the lease table it
 * creates, from its context: a policy with `counting: hybrid` rules on a global table reserves
 * in a single-region table of its own (`leaseTable`: default `rate-limit-leases`, "" for the
 * global table's us-east-1 items); `regionAllowance` turns on the store's region holders and
 * allowances, kept in the global table itself, whose every replica the role may already write.
 */
export function bundledStore(context: {
  readonly tableName: string;
  readonly replicaRegions: readonly string[];
  readonly hybrid: boolean;
  readonly leaseTable?: string | undefined;
  readonly regionAllowance?: boolean | undefined;
}): {
  readonly store: {
    readonly table: string;
    readonly region: string;
    readonly globalRegions?: readonly string[];
    readonly leaseRegion?: string;
    readonly leaseTable?: string;
    readonly regionHolder?: boolean;
    readonly regionAllowance?: boolean;
  };
  readonly leaseTableName: string | undefined;
} {
  const global = context.replicaRegions.length > 0;
  if (context.regionAllowance === true && !(context.hybrid && global)) {
    throw new Error(
      "regionAllowance: needs a policy with counting: hybrid rules and replicas (a global table)",
    );
  }
  const leaseTableName =
    context.hybrid && global && context.leaseTable !== ""
      ? (context.leaseTable ?? "rate-limit-leases")
      : undefined;
  return {
    store: {
      table: context.tableName,
      region: "us-east-1",
      ...(global ? { globalRegions: ["us-east-1", ...context.replicaRegions] } : {}),
      ...(leaseTableName === undefined
        ? {}
        : { leaseRegion: "us-east-1", leaseTable: leaseTableName }),
      ...(context.regionAllowance === true ? { regionHolder: true, regionAllowance: true } : {}),
    },
    leaseTableName,
  };
}

/** The policy's default decision budget (`budget` unset). */
const DEFAULT_BUDGET_MS = 50;

/** The only item operations the store issues (UpdateItem always; GetItem and Query for sliding windows, token buckets and the per-region sums). */
export const STORE_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"] as const;

/** What reading operators' overrides adds: the shards' `BatchGetItem` (the version is a `GetItem`). */
export const OVERRIDE_ACTIONS = ["dynamodb:BatchGetItem"] as const;

export interface RateLimitFunctionsProps {
  /** Zips built by `edgelimit build lambda-edge`. */
  readonly viewerRequestZip: string;
  readonly viewerResponseZip: string;
  readonly table: TableV2;
  /** Regions whose replica the functions may write (the table's own region included). */
  readonly tableRegions: readonly string[];
  /** The hybrid counting reservations' own table, in us-east-1 only (see `leaseTable`). */
  readonly leaseTable?: TableV2 | undefined;
  /**
   * Whether the viewer-request bundle reads operators' overrides (`BuiltFunction.overrides`):
   * its role may then also run `BatchGetItem`, on the rate-limit table and its replicas only.
   */
  readonly readsOverrides?: boolean;
}

/**
 * The two Lambda@Edge functions (always created in us-east-1, as CloudFront requires) and the
 * least privilege they need: the viewer-request function may run only the store's item
 * operations, only on the rate-limit table and its replicas (and, when it reads overrides,
 * `BatchGetItem` on the same); the viewer-response function touches no AWS service at all.
 */
export class RateLimitFunctions extends Construct {
  readonly viewerRequest: cloudfront.experimental.EdgeFunction;
  readonly viewerResponse: cloudfront.experimental.EdgeFunction;

  constructor(scope: Construct, id: string, props: RateLimitFunctionsProps) {
    super(scope, id);
    const common = {
      // nodejs20.x can no longer be created (AWS blocked it on 2026-08-31); the bundle targets Node 20 syntax.
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: "index.handler",
      memorySize: 128,
    };
    this.viewerRequest = new cloudfront.experimental.EdgeFunction(this, "ViewerRequest", {
      ...common,
      code: lambda.Code.fromAsset(props.viewerRequestZip),
      description:
        "edgelimit viewer-request: counts in DynamoDB and answers 429/302/503 at the edge",
    });
    this.viewerResponse = new cloudfront.experimental.EdgeFunction(this, "ViewerResponse", {
      ...common,
      code: lambda.Code.fromAsset(props.viewerResponseZip),
      description: "edgelimit viewer-response: adds the rate-limit headers",
    });
    const stack = Stack.of(this);
    const tableArns = props.tableRegions.map((region) =>
      stack.formatArn({
        service: "dynamodb",
        region,
        resource: "table",
        resourceName: props.table.tableName,
      }),
    );
    this.viewerRequest.addToRolePolicy(
      new PolicyStatement({
        actions: [...STORE_ACTIONS],
        resources: [
          ...tableArns,
          ...(props.leaseTable === undefined ? [] : [props.leaseTable.tableArn]),
        ],
      }),
    );
    // Overrides live in the rate-limit table only, never in the lease table.
    if (props.readsOverrides === true) {
      this.viewerRequest.addToRolePolicy(
        new PolicyStatement({ actions: [...OVERRIDE_ACTIONS], resources: tableArns }),
      );
    }
  }

  /** The associations for a behavior of an existing distribution. */
  edgeLambdas(): cloudfront.EdgeLambda[] {
    return [
      {
        functionVersion: this.viewerRequest.currentVersion,
        eventType: cloudfront.LambdaEdgeEventType.VIEWER_REQUEST,
        // The challenge's verification is a form POST answered at the edge.
        includeBody: true,
      },
      {
        functionVersion: this.viewerResponse.currentVersion,
        eventType: cloudfront.LambdaEdgeEventType.VIEWER_RESPONSE,
      },
    ];
  }
}

export interface EdgeRateLimitStackProps extends StackProps {
  readonly viewerRequestZip: string;
  readonly viewerResponseZip: string;
  readonly tableName?: string;
  /** Replica regions besides us-east-1 (default `DEFAULT_REPLICA_REGIONS`; [] for one region). */
  readonly replicaRegions?: readonly string[];
  /**
   * The policy's decision budget (`policy.budgetMs`, default 50): the stack warns for each
   * Lambda@Edge region whose nearest replica is farther than this.
   */
  readonly budgetMs?: number;
  /**
   * A table of its own, in us-east-1 only, for the reservations of rules with `counting:
   * hybrid` (the bundle's `leaseTable`): reservations are written in one region anyway, and a
   * table without replicas does not pay a replicated write for each (docs/accuracy.md).
   * Default: none, the reservations go to the global table's us-east-1 items.
   */
  readonly leaseTableName?: string;
  /**
   * Whether the viewer-request bundle reads operators' overrides (`edgelimit build` decides:
   * `BuiltFunction.overrides`, `overrides` in its manifest.json): grants `BatchGetItem` too.
   * Without it a bundle that reads them is refused its first read, and applies none.
   */
  readonly readsOverrides?: boolean;
  /** The origin the new distribution fronts. Omit `originDomain` and use `functions.edgeLambdas()` to attach to an existing one. */
  readonly originDomain?: string;
}

/**
 * Seed 000's infrastructure: the `rate-limits` table (PK/SK, TTL on `ttl`, on-demand, Global
 * Tables replicas), both functions, and a CloudFront distribution that runs them.
 */
export class EdgeRateLimitStack extends Stack {
  readonly table: TableV2;
  readonly leaseTable: TableV2 | undefined;
  readonly functions: RateLimitFunctions;
  readonly distribution: cloudfront.Distribution | undefined;

  constructor(scope: Construct, id: string, props: EdgeRateLimitStackProps) {
    super(scope, id, { ...props, env: { ...props.env, region: "us-east-1" } });
    const replicaRegions = props.replicaRegions ?? DEFAULT_REPLICA_REGIONS;
    for (const warning of distantReplicaWarnings(
      ["us-east-1", ...replicaRegions],
      props.budgetMs ?? DEFAULT_BUDGET_MS,
    ))
      Annotations.of(this).addWarning(warning);
    this.table = new TableV2(this, "RateLimitTable", {
      tableName: props.tableName ?? "rate-limits",
      partitionKey: { name: "PK", type: AttributeType.STRING },
      sortKey: { name: "SK", type: AttributeType.STRING },
      timeToLiveAttribute: "ttl",
      billing: Billing.onDemand(),
      replicas: replicaRegions.map((region) => ({ region })),
      // Counters are disposable: a redeploy may start them from zero.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.leaseTable =
      props.leaseTableName === undefined
        ? undefined
        : new TableV2(this, "LeaseTable", {
            tableName: props.leaseTableName,
            partitionKey: { name: "PK", type: AttributeType.STRING },
            sortKey: { name: "SK", type: AttributeType.STRING },
            timeToLiveAttribute: "ttl",
            billing: Billing.onDemand(),
            removalPolicy: RemovalPolicy.DESTROY,
          });
    this.functions = new RateLimitFunctions(this, "Functions", {
      leaseTable: this.leaseTable,
      viewerRequestZip: props.viewerRequestZip,
      viewerResponseZip: props.viewerResponseZip,
      table: this.table,
      tableRegions: ["us-east-1", ...replicaRegions],
      readsOverrides: props.readsOverrides,
    });
    this.distribution =
      props.originDomain === undefined
        ? undefined
        : new cloudfront.Distribution(this, "Distribution", {
            comment: "edgelimit rate-limited distribution",
            defaultBehavior: {
              origin: new origins.HttpOrigin(props.originDomain),
              viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
              allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
              // Rate-limited responses carry per-client headers: never serve them from cache.
              cachePolicy: cloudfront.CachePolicy.CACHING_DISABLED,
              originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
              edgeLambdas: this.functions.edgeLambdas(),
            },
          });
  }
}
