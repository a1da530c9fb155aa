import type { AddressList } from "../limiter.js";
import type { ResolvedList, ResolvedPolicy } from "../policy/types.js";
import {
  type ListSource,
  type ListStats,
  type RefreshingList,
  refreshingList,
} from "./refreshing.js";
import {
  type AwsCredentials,
  awsCredentialsFromEnv,
  dynamoDbListSource,
  httpListSource,
  s3ListSource,
} from "./sources.js";

export { parseListBody } from "./parse.js";
export {
  type ListSource,
  type ListStats,
  type RefreshingList,
  type RefreshingListOptions,
  refreshingList,
} from "./refreshing.js";
export {
  type AwsCredentials,
  awsCredentialsFromEnv,
  dynamoDbListSource,
  httpListSource,
  s3ListSource,
} from "./sources.js";

export interface ListsOptions {
  /** Environment for AWS credentials (defaults to `process.env` where it exists). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly credentials?: AwsCredentials;
  readonly fetch?: typeof fetch;
  readonly clock?: () => number;
  readonly mode?: "interval" | "on-access";
  /**
   * Builds the source for `file:` lists. Node callers may omit it: the node:fs source is then
   * imported on demand, so that edge bundles that never list a file never pull in node:fs.
   */
  readonly fileSource?: (path: string) => ListSource;
  readonly onError?: (error: unknown, stats: ListStats) => void;
  /** Failed loads are logged here when no `onError` is given (pino and console both fit). */
  readonly logger?: { warn(message: object): void };
  /** Wait for every list's first load before resolving (default true). */
  readonly waitForFirstLoad?: boolean;
}

export interface Lists {
  readonly allow: AddressList[];
  readonly deny: AddressList[];
  stats(): ListStats[];
  close(): void;
}

/**
 * Starts every refreshing list the policy names (`lists:`) and hands back the allow and deny
 * lists for `createLimiter({ allowlists, denylists })`. The static `allowlist`/`denylist`
 * CIDRs are not here: the limiter reads those from the policy itself.
 */
export async function createLists(
  policy: ResolvedPolicy,
  options: ListsOptions = {},
): Promise<Lists> {
  const started: RefreshingList[] = [];
  try {
    for (const list of policy.lists) {
      const source = await sourceFor(list, options);
      started.push(
        refreshingList({
          name: list.name,
          kind: list.kind,
          source,
          refreshMs: list.refreshMs,
          clock: options.clock,
          mode: options.mode,
          onError: options.onError ?? logFailure(options.logger),
        }),
      );
    }
  } catch (error) {
    for (const list of started) list.close();
    throw error;
  }
  if (options.waitForFirstLoad !== false) await Promise.all(started.map((list) => list.ready));
  return {
    allow: started.filter((list) => list.stats().kind === "allow"),
    deny: started.filter((list) => list.stats().kind === "deny"),
    stats: () => started.map((list) => list.stats()),
    close: () => {
      for (const list of started) list.close();
    },
  };
}

async function sourceFor(list: ResolvedList, options: ListsOptions): Promise<ListSource> {
  const source = list.source;
  switch (source.type) {
    case "file": {
      if (options.fileSource !== undefined) return options.fileSource(source.path);
      // A computed specifier keeps bundlers from inlining node:fs into edge builds.
      const fileModule = "./file.js";
      const { fileListSource } = (await import(fileModule)) as typeof import("./file.js");
      return fileListSource(source.path);
    }
    case "http":
      return httpListSource(source.url, { fetch: options.fetch });
    case "s3":
      return s3ListSource({
        bucket: source.bucket,
        key: source.key,
        region: source.region,
        endpoint: source.endpoint,
        credentials: credentials(options),
      });
    case "dynamodb":
      return dynamoDbListSource({
        table: source.table,
        region: source.region,
        key: source.key,
        attribute: source.attribute,
        endpoint: source.endpoint,
        credentials: credentials(options),
      });
  }
}

function credentials(options: ListsOptions): AwsCredentials {
  if (options.credentials !== undefined) return options.credentials;
  const processEnv = (globalThis as { process?: { env?: Record<string, string | undefined> } })
    .process?.env;
  return awsCredentialsFromEnv(options.env ?? processEnv ?? {});
}

function logFailure(
  logger: ListsOptions["logger"],
): ((error: unknown, stats: ListStats) => void) | undefined {
  if (logger === undefined) return undefined;
  return (_error, stats) =>
    logger.warn({ msg: "list refresh failed; keeping the last good list", list: stats });
}
