/**
 * An envoyproxy/ratelimit configuration loaded: per domain, a tree of descriptors keyed as that
 * service keys them (`key` alone for a default, `key_value` for a value, `*` in a value for a
 * wildcard), each with the limit it sets and the counters (core rules) that limit is counted
 * on. The checks here are the ones that need the whole tree or several files, with the same
 * words as envoyproxy/ratelimit: an empty domain or key, a domain twice, a descriptor twice at
 * one level, a unit it does not know, `unlimited` with a unit, an empty or self `replaces`,
 * `share_threshold` without a wildcard.
 */
import type { PolicyIssue } from "../core/errors.js";
import type { ResolvedRule } from "../core/model.js";
import { plainRule } from "../core/plain-rule.js";
import type { WindowSpec } from "../core/types.js";
import type { YamlDescriptor, YamlFile } from "./config-yaml.js";
import { type DescriptorExtension, readExtension } from "./extension.js";
import {
  type CurrentLimit,
  UNIT,
  UNIT_SECONDS,
  type Unit,
  type UnitName,
  unitOfWindow,
} from "./messages.js";

/** What one configured descriptor sets, and the counters it is counted on. */
export interface ConfiguredLimit {
  /** `domain.key_value.subkey`: where the descriptor is in the configuration. */
  readonly fullKey: string;
  readonly requestsPerUnit: number;
  /** `UNIT.UNKNOWN` when unlimited. */
  readonly unit: Unit;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  /** Its `rate_limit` as a core rule, then the extension's further limits (none when unlimited). */
  readonly rules: readonly ResolvedRule[];
  /** What a status reports when `rules[i]` binds (see `reportedLimits`). */
  readonly reported: readonly CurrentLimit[];
}

export interface Wildcard {
  /** The configured composite key (`path_/api/*`). */
  readonly key: string;
  /** `key` split on `*`, once at load. */
  readonly parts: readonly string[];
}

export interface DescriptorNode {
  readonly children: ReadonlyMap<string, DescriptorNode>;
  readonly wildcards: readonly Wildcard[];
  readonly limit: ConfiguredLimit | undefined;
  /** `share_threshold`: the wildcard value every value it matches is counted under (`files*`). */
  readonly sharedValue: string | undefined;
}

export interface RlsConfig {
  readonly domains: ReadonlyMap<string, DescriptorNode>;
  /** Every configured limit, for the dashboard. */
  readonly limits: readonly ConfiguredLimit[];
  readonly files: readonly string[];
}

export interface BuildOptions {
  /** envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`: files naming one domain are merged, not refused. */
  readonly mergeDomains: boolean;
  /** envoyproxy/ratelimit's `SHADOW_MODE`: every limit counts and reports, none refuses. */
  readonly globalShadow: boolean;
}

interface MutableNode {
  readonly children: Map<string, MutableNode>;
  readonly wildcards: Wildcard[];
  limit: ConfiguredLimit | undefined;
  sharedValue: string | undefined;
}

export function buildConfig(
  files: readonly YamlFile[],
  options: BuildOptions,
): { config: RlsConfig | undefined; issues: PolicyIssue[] } {
  const issues: PolicyIssue[] = [];
  const domains = new Map<string, MutableNode>();
  const limits: ConfiguredLimit[] = [];
  for (const file of files) {
    const fail = (line: number, path: string, message: string): void => {
      issues.push({ file: file.name, line, path, message, code: "EL_RLS_CONFIG" });
    };
    if (file.domain === "") {
      fail(file.line, "domain", "config file cannot have empty domain");
      continue;
    }
    let root = domains.get(file.domain);
    if (root !== undefined && !options.mergeDomains) {
      fail(
        file.line,
        "domain",
        `duplicate domain '${file.domain}' in config file (set MERGE_DOMAIN_CONFIG=true to merge files of one domain)`,
      );
      continue;
    }
    if (root === undefined) {
      root = emptyNode();
      domains.set(file.domain, root);
    }
    const loader = { file, options, fail, limits, issues };
    loadDescriptors(loader, root, `${file.domain}.`, file.descriptors, "descriptors");
  }
  if (issues.length > 0) return { config: undefined, issues };
  return { config: { domains, limits, files: files.map((file) => file.name) }, issues };
}

interface Loader {
  readonly file: YamlFile;
  readonly options: BuildOptions;
  readonly fail: (line: number, path: string, message: string) => void;
  readonly limits: ConfiguredLimit[];
  readonly issues: PolicyIssue[];
}

function loadDescriptors(
  loader: Loader,
  parent: MutableNode,
  parentKey: string,
  descriptors: readonly YamlDescriptor[],
  path: string,
): void {
  descriptors.forEach((descriptor, index) => {
    const here = `${path}[${index}]`;
    if (descriptor.key === "") {
      loader.fail(descriptor.line, here, "descriptor has empty key");
      return;
    }
    const finalKey =
      descriptor.value === "" ? descriptor.key : `${descriptor.key}_${descriptor.value}`;
    const fullKey = parentKey + finalKey;
    if (parent.children.has(finalKey)) {
      loader.fail(descriptor.line, here, `duplicate descriptor composite key '${fullKey}'`);
      return;
    }
    const node = emptyNode();
    node.limit = configuredLimit(loader, descriptor, fullKey, here);
    if (descriptor.shareThreshold) {
      if (!finalKey.includes("*")) {
        loader.fail(
          descriptor.line,
          `${here}.share_threshold`,
          `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`,
        );
      } else {
        node.sharedValue = finalKey.slice(descriptor.key.length + 1);
      }
    }
    if (finalKey.includes("*"))
      parent.wildcards.push({ key: finalKey, parts: finalKey.split("*") });
    parent.children.set(finalKey, node);
    loadDescriptors(loader, node, `${fullKey}.`, descriptor.descriptors, `${here}.descriptors`);
  });
}

function configuredLimit(
  loader: Loader,
  descriptor: YamlDescriptor,
  fullKey: string,
  path: string,
): ConfiguredLimit | undefined {
  const rateLimit = descriptor.rateLimit;
  if (rateLimit === undefined) return undefined;
  const { fail, file } = loader;
  const unit = knownUnit(rateLimit.unit);
  if (rateLimit.unlimited) {
    if (unit !== undefined) {
      fail(
        rateLimit.unitLine,
        `${path}.rate_limit.unit`,
        "should not specify rate limit unit when unlimited",
      );
    }
  } else if (unit === undefined) {
    fail(
      rateLimit.unitLine,
      `${path}.rate_limit.unit`,
      `invalid rate limit unit '${rateLimit.unit}' (one of second, minute, hour, day, week, month, year)`,
    );
  }
  for (const replaces of rateLimit.replaces) {
    if (replaces.name === "") {
      fail(replaces.line, `${path}.rate_limit.replaces`, "should not have an empty replaces entry");
    } else if (replaces.name === rateLimit.name) {
      fail(
        replaces.line,
        `${path}.rate_limit.replaces`,
        "replaces should not contain name of same descriptor",
      );
    }
  }
  const { extension, issues } = readExtension(descriptor.metadata, {
    file: file.name,
    line: descriptor.metadataLine,
    path,
  });
  loader.issues.push(...issues);
  const rules =
    rateLimit.unlimited || unit === undefined
      ? []
      : descriptorRules(fullKey, rateLimit.requestsPerUnit, unit, extension, {
          // A quota's counters count and never refuse on their own: the response decides
          // (over only when every quota of the request is over).
          observe: descriptor.shadowMode || descriptor.quotaMode || loader.options.globalShadow,
        });
  const limit: ConfiguredLimit = {
    fullKey,
    requestsPerUnit: rateLimit.requestsPerUnit,
    unit: unit ?? UNIT.UNKNOWN,
    unlimited: rateLimit.unlimited,
    name: rateLimit.name,
    replaces: rateLimit.replaces.map((replaces) => replaces.name),
    shadowMode: descriptor.shadowMode,
    quotaMode: descriptor.quotaMode,
    rules,
    reported: reportedLimits(rateLimit.name, rateLimit.requestsPerUnit, rules),
  };
  const counted = new Set<string>();
  for (const rule of limit.rules) {
    const counter = `${rule.algorithm} ${"ms" in rule.window ? rule.window.ms : `${rule.window.months}mo`}`;
    if (counted.has(counter)) {
      fail(
        descriptor.metadataLine,
        `${path}.metadata.edgelimit.limits`,
        `two limits of this descriptor count in the same window with the same algorithm (${rule.algorithm}); keep the lower limit`,
      );
    }
    counted.add(counter);
  }
  loader.limits.push(limit);
  return limit;
}

/**
 * The core rules a descriptor is counted on: its `rate_limit` (the unit's length unless the
 * extension gives a window), then each further limit of the extension.
 */
export function descriptorRules(
  id: string,
  requestsPerUnit: number,
  unit: Exclude<Unit, 0>,
  extension: DescriptorExtension,
  mode: { readonly observe: boolean },
): ResolvedRule[] {
  const unitWindow: WindowSpec = { ms: UNIT_SECONDS[unit] * 1000 };
  const first = ruleFor(id, requestsPerUnit, extension.window ?? unitWindow, extension, mode);
  const more = extension.limits.map((extra, index) =>
    ruleFor(`${id}.limits[${index}]`, extra.limit, extra.window, { ...extension, ...extra }, mode),
  );
  return [first, ...more];
}

/**
 * What a status reports when each rule binds: the `rate_limit` as configured (its name, its
 * requests per unit), or an extension's limit (its id); the unit the rule's window is exactly,
 * UNKNOWN for another length.
 */
export function reportedLimits(
  name: string,
  requestsPerUnit: number,
  rules: readonly ResolvedRule[],
): CurrentLimit[] {
  return rules.map((rule, index) =>
    index === 0
      ? { name, requestsPerUnit, unit: unitOfWindow(rule.window) }
      : { name: rule.id, requestsPerUnit: rule.limit, unit: unitOfWindow(rule.window) },
  );
}

function ruleFor(
  id: string,
  limit: number,
  window: WindowSpec,
  options: Pick<DescriptorExtension, "algorithm" | "failMode" | "counting">,
  mode: { readonly observe: boolean },
): ResolvedRule {
  const { algorithm, failMode, counting } = options;
  return plainRule({ id, limit, window, algorithm, failMode, counting, shadow: mode.observe });
}

/** A unit's number from its name in any case (`minute`, `MINUTE`); `UNKNOWN` is not one. */
export function knownUnit(name: string): Exclude<Unit, 0> | undefined {
  const upper = name.toUpperCase();
  if (!(upper in UNIT)) return undefined;
  const unit = UNIT[upper as UnitName];
  return unit === UNIT.UNKNOWN ? undefined : unit;
}

function emptyNode(): MutableNode {
  return { children: new Map(), wildcards: [], limit: undefined, sharedValue: undefined };
}
