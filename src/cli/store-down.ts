import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";

/** Rule ids named in full before "and N more": a log line, not a listing (`check` has that). */
const NAMED_RULES = 4;

/**
 * What `serve` logs when its store does not answer at start: what the policy's rules do until it
 * does, by each rule's `failMode` (core/local-fallback.ts decides; this only says it). A shadow
 * rule never refuses, so a shadow `closed` rule answers no 503: it is left uncounted, as `open`.
 */
export function storeDownWarning(policy: ResolvedPolicy): string {
  const local = policy.rules.filter((rule) => rule.failMode === "local");
  const closed = policy.rules.filter((rule) => rule.failMode === "closed" && !rule.shadow);
  const uncounted = policy.rules.filter((rule) => !local.includes(rule) && !closed.includes(rule));
  const all = policy.rules.length;
  const parts: string[] = [];
  if (local.length > 0) {
    parts.push(
      `${rulesNamed(local, all)} (failMode local) ${local.length === 1 ? "is counted in this process against its own limit" : "are counted in this process, each against its own limit"}`,
    );
  }
  if (uncounted.length > 0) {
    const one = uncounted.length === 1;
    const mode = uncounted.every((rule) => rule.failMode === "open")
      ? "failMode open"
      : "failMode open, or closed on a shadow rule";
    parts.push(
      `${rulesNamed(uncounted, all)} (${mode}) ${one ? "is" : "are"} not counted: ${one ? "its" : "their"} requests are admitted`,
    );
  }
  if (closed.length > 0) {
    const who =
      closed.length === all && all > 1
        ? "every request (all rules have failMode closed)"
        : `a request matching ${closed.length === 1 ? "" : "any of "}${rulesNamed(closed, all)} (failMode closed)`;
    parts.push(`${who} is answered 503`);
  }
  if (policy.failClosedPaths.length > 0) {
    parts.push(`requests under ${policy.failClosedPaths.join(", ")} (failClosed) are answered 503`);
  }
  if (parts.length === 0) parts.push("the policy has no rules to count");
  return `the store is not reachable at start; until it answers, ${parts.join("; ")}`;
}

function rulesNamed(rules: readonly ResolvedRule[], all: number): string {
  if (rules.length === all && all > 1) return `all ${all} rules`;
  const ids = rules.slice(0, NAMED_RULES).map((rule) => rule.id);
  const more = rules.length - ids.length;
  const named = more > 0 ? `${ids.join(", ")} and ${more} more` : ids.join(", ");
  return `${rules.length === 1 ? "rule" : "rules"} ${named}`;
}
