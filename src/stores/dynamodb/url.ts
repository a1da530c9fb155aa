import { EdgelimitError } from "../../core/errors.js";
import { checkArgument } from "../../core/options.js";
import { parseStoreUrl } from "../store-url.js";
import { DynamoDbStore, type DynamoDbStoreOptions } from "./store.js";

const DEFAULT_TABLE = "rate-limits";

/**
 * `dynamodb://TABLE?region=R[&endpoint=URL][&regions=R1,R2][&remoteCacheMs=N][&leaseRegion=R]
 * [&leaseTable=T][&regionHolder=true][&holderTable=T][&regionAllowance=true]` (where hybrid
 * counting reserves, and its opt-in region holders and allowances; see `DynamoDbStoreOptions`), as `edgelimit serve --store` and
 * `edgelimit build lambda-edge --store` take it.
 */
export function parseDynamodbUrl(url: string): DynamoDbStoreOptions {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkArgument("parseDynamodbUrl", "the URL", url, "string", "EL_STORE_URL");
  const parsed = parseStoreUrl(url, "not a URL: expected dynamodb://TABLE?region=R");
  if (parsed.protocol !== "dynamodb:") {
    throw new EdgelimitError("EL_STORE_URL", `expected dynamodb://TABLE?region=R; got ${url}`);
  }
  const table = decodeURIComponent(parsed.hostname || parsed.pathname.replace(/^\/+/, ""));
  const region = parsed.searchParams.get("region") ?? "";
  if (region === "") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `${url}: add ?region=REGION (for example ?region=us-east-1)`,
    );
  }
  const regions = parsed.searchParams.get("regions");
  const remoteCacheMs = parsed.searchParams.get("remoteCacheMs");
  return {
    table: table === "" ? DEFAULT_TABLE : table,
    region,
    ...(parsed.searchParams.get("endpoint")
      ? { endpoint: parsed.searchParams.get("endpoint") as string }
      : {}),
    ...(regions
      ? {
          globalRegions: regions
            .split(",")
            .map((entry) => entry.trim())
            .filter(Boolean),
        }
      : {}),
    ...(remoteCacheMs ? { remoteCacheMs: Number(remoteCacheMs) } : {}),
    ...optional(parsed.searchParams, "leaseRegion"),
    ...optional(parsed.searchParams, "leaseTable"),
    ...flag(url, parsed.searchParams, "regionHolder"),
    ...flag(url, parsed.searchParams, "regionAllowance"),
    ...optional(parsed.searchParams, "holderTable"),
  };
}

function flag(
  url: string,
  params: URLSearchParams,
  name: "regionHolder" | "regionAllowance",
): Partial<Record<typeof name, boolean>> {
  const value = params.get(name);
  if (value === null) return {};
  if (value === "true" || value === "false") return { [name]: value === "true" };
  throw new EdgelimitError(
    "EL_STORE_URL",
    `${url}: ${name} is true or false; got ${JSON.stringify(value)}`,
  );
}

function optional(
  params: URLSearchParams,
  name: "leaseRegion" | "leaseTable" | "holderTable",
): Partial<Record<typeof name, string>> {
  const value = params.get(name);
  return value ? { [name]: value } : {};
}

export function dynamodbStoreFromUrl(url: string): DynamoDbStore {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkArgument("dynamodbStoreFromUrl", "the URL", url, "string", "EL_STORE_URL");
  return new DynamoDbStore(parseDynamodbUrl(url));
}
