import type { ResolvedPolicy } from "../core/model.js";

/** Header names an offline run puts a verified user and plan in (never a client's headers). */
export interface OfflineUsers {
  readonly user: string;
  readonly plan: string;
}

/**
 * A policy as replay and simulate run it, with no token to verify and nothing to fetch. The
 * client address is the socket peer: the layer that logged or modeled the request saw it itself,
 * and a forwarded header is what a client wrote. A verified user arrives in the `users` headers,
 * set only by the offline tool (a log's user field, a simulated user), instead of a signed
 * token, so the policy's secrets are never read; without `users` every request is anonymous.
 * Refreshing allow and deny lists (file, HTTP, S3, DynamoDB) are not fetched; the policy's own
 * `allowlist` and `denylist` apply.
 */
export function offlinePolicy(
  policy: ResolvedPolicy,
  users: OfflineUsers | undefined,
): ResolvedPolicy {
  return {
    ...policy,
    identity: {
      ...policy.identity,
      ip: { ...policy.identity.ip, source: "socket", header: undefined },
      jwt: undefined,
      trustedHeader: users === undefined ? undefined : { ...users, from: "any" },
    },
    lists: [],
  };
}
