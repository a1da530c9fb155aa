/**
 * Which configured limit a request's descriptor is held to, found as envoyproxy/ratelimit finds
 * it: entry by entry down the domain's tree, trying `key_value`, then the level's wildcards in
 * the order they were configured, then `key` alone (the default for any value); the limit is
 * the one at the descriptor's last entry. A descriptor with more entries than the tree is deep,
 * or whose last entry has no limit, is held to none.
 */
import type { ConfiguredLimit, DescriptorNode, RlsConfig, Wildcard } from "./config.js";
import type { DescriptorEntry } from "./messages.js";

export interface FoundLimit {
  readonly limit: ConfiguredLimit;
  /**
   * For entries matched by a `share_threshold` wildcard, the wildcard value they are counted
   * under instead of their own (indexed like the entries); undefined when there are none.
   */
  readonly sharedValues: readonly (string | undefined)[] | undefined;
}

export function findLimit(
  config: RlsConfig,
  domain: string,
  entries: readonly DescriptorEntry[],
): FoundLimit | undefined {
  const root = config.domains.get(domain);
  if (root === undefined) return undefined;
  let level: DescriptorNode = root;
  let found: ConfiguredLimit | undefined;
  let sharedValues: (string | undefined)[] | undefined;
  const last = entries.length - 1;
  for (let index = 0; index <= last; index++) {
    const entry = entries[index] as DescriptorEntry;
    const composite = `${entry.key}_${entry.value}`;
    let next = level.children.get(composite);
    let byWildcard = false;
    if (next === undefined && level.wildcards.length > 0) {
      const wildcard = level.wildcards.find((candidate) => wildcardMatches(candidate, composite));
      if (wildcard !== undefined) {
        next = level.children.get(wildcard.key);
        byWildcard = true;
      }
    }
    next ??= level.children.get(entry.key);
    if (next === undefined) break;
    if (byWildcard && next.sharedValue !== undefined) {
      sharedValues ??= new Array(entries.length).fill(undefined);
      sharedValues[index] = next.sharedValue;
    }
    if (index === last && next.limit !== undefined) found = next.limit;
    if (next.children.size === 0) break;
    level = next;
  }
  return found === undefined ? undefined : { limit: found, sharedValues };
}

/** Each `*` matches any run of characters (none included); the rest must match in order. */
export function wildcardMatches(wildcard: Wildcard, value: string): boolean {
  const { parts } = wildcard;
  const first = parts[0] as string;
  if (parts.length === 1) return first === value;
  const final = parts[parts.length - 1] as string;
  if (!value.startsWith(first) || !value.endsWith(final)) return false;
  if (value.length < first.length + final.length) return false;
  let at = first.length;
  const end = value.length - final.length;
  for (let index = 1; index < parts.length - 1; index++) {
    const part = parts[index] as string;
    const position = value.indexOf(part, at);
    if (position === -1 || position + part.length > end) return false;
    at = position + part.length;
  }
  return true;
}
