/** The policy's companions: its challenge settings and its refreshing allow/deny lists. */
import { parseDurationMs } from "../core/duration.js";
import type { ResolvedChallenge, ResolvedList } from "../core/model.js";
import { normalizePath } from "../core/path.js";
import type { PolicySpec } from "./schema.js";

const VERIFY_URLS = {
  turnstile: "https://challenges.cloudflare.com/turnstile/v0/siteverify",
  hcaptcha: "https://api.hcaptcha.com/siteverify",
} as const;

export function resolveChallenge(spec: PolicySpec["challenge"]): ResolvedChallenge {
  const provider = spec?.provider;
  return {
    path: normalizePath(spec?.path ?? "/captcha"),
    secret: spec?.secret,
    previousSecret: spec?.previousSecret,
    policyId: spec?.policyId,
    passTtlMs: parseDurationMs(spec?.passTtl ?? "30m"),
    challengeTtlMs: parseDurationMs(spec?.challengeTtl ?? "2m"),
    difficulty: spec?.difficulty ?? 16,
    cookie: { name: spec?.cookie?.name ?? "edgelimit_pass", secure: spec?.cookie?.secure ?? true },
    provider:
      provider === undefined ||
      provider.kind === "pow" ||
      provider.siteKey === undefined ||
      provider.secret === undefined
        ? { kind: "pow" }
        : {
            kind: provider.kind,
            siteKey: provider.siteKey,
            secret: provider.secret,
            verifyUrl: provider.verifyUrl ?? VERIFY_URLS[provider.kind],
          },
  };
}

export function resolveList(spec: NonNullable<PolicySpec["lists"]>[number]): ResolvedList {
  const base = {
    name: spec.name,
    kind: spec.kind,
    refreshMs: parseDurationMs(spec.refresh ?? "5m"),
  };
  if (spec.file !== undefined) return { ...base, source: { type: "file", path: spec.file } };
  if (spec.url !== undefined) return { ...base, source: { type: "http", url: spec.url } };
  if (spec.s3 !== undefined) {
    return { ...base, source: { type: "s3", ...spec.s3, endpoint: spec.s3.endpoint } };
  }
  const dynamodb = spec.dynamodb as NonNullable<typeof spec.dynamodb>;
  return {
    ...base,
    source: {
      type: "dynamodb",
      table: dynamodb.table,
      region: dynamodb.region,
      key: dynamodb.key,
      attribute: dynamodb.attribute ?? "cidrs",
      endpoint: dynamodb.endpoint,
    },
  };
}

/** The overrides' `refresh` in ms, or undefined for the default (5 s). */
export function overrideRefreshMs(spec: string | number | undefined): number | undefined {
  return spec === undefined ? undefined : parseDurationMs(spec);
}
