import type { StoreStatus } from "../../core/types.js";
import type { RemoteGuard } from "./guard.js";

/**
 * A store's status from its guards (one per endpoint or node) and, where it has one, its
 * connection gate: `open` when any breaker is open, `connecting` while the first connection is
 * under way, `failing` when calls failed since their last success, else `ok`.
 */
export function statusOf(
  guards: Iterable<RemoteGuard>,
  connection: "connecting" | "ready" | "down" = "ready",
): StoreStatus {
  let failures = 0;
  let opened = 0;
  let rejected = 0;
  let failing = connection === "down";
  let last: RemoteGuard | undefined;
  const openParts: string[] = [];
  for (const guard of guards) {
    failures += guard.failures;
    opened += guard.breaker?.opened ?? 0;
    rejected += guard.breaker?.rejected ?? 0;
    if (guard.breakerState === "open" || guard.breakerState === "probing") {
      openParts.push(guard.name);
    }
    if (!guard.healthy) failing = true;
    if (guard.lastErrorAt !== undefined && (last?.lastErrorAt ?? -1) <= guard.lastErrorAt) {
      last = guard;
    }
  }
  const state =
    openParts.length > 0
      ? "open"
      : connection === "connecting"
        ? "connecting"
        : failing
          ? "failing"
          : "ok";
  return {
    state,
    failures,
    lastError: last?.lastError,
    lastErrorAt: last?.lastErrorAt,
    breakerOpened: opened,
    breakerRejected: rejected,
    openParts,
  };
}
