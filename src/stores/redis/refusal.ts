/**
 * Redis's error replies, sorted into the two kinds a breaker must tell apart. Most are Redis
 * refusing this call's data (`ERR value is not an integer or out of range` from the script,
 * `WRONGTYPE` for a key another program wrote): the server is up and answering, and the next
 * call, for another rule or subject, may well succeed. A few say the server itself cannot serve
 * now, whatever the call: those count as the server failing, as a timeout or a lost connection
 * does.
 */

/** Error codes (a reply's first word) that say the server cannot serve, whatever the call. */
const SERVER_STATES = new Set([
  "LOADING", // restarting, reading its data
  "BUSY", // a script runs too long
  "MASTERDOWN",
  "READONLY", // a replica after a failover
  "OOM",
  "CLUSTERDOWN",
  "TRYAGAIN",
  "NOREPLICAS",
  "MISCONF", // cannot persist, refuses writes
  "NOAUTH",
  "WRONGPASS",
  "NOPERM",
]);

/**
 * True when `error` is an error reply that refuses this call's data (see above). `reply` says
 * whether it is an error reply at all: ioredis's `ReplyError`, the REST store's
 * `RedisReplyError`; anything else (a timeout, a closed connection) is the server failing.
 */
export function refusesCall(error: unknown, reply: (error: Error) => boolean): boolean {
  if (!(error instanceof Error) || !reply(error)) return false;
  const code = /^[A-Z]+/.exec(error.message)?.[0] ?? "";
  return !SERVER_STATES.has(code) && !error.message.startsWith("ERR max number of clients");
}

/**
 * True when Redis answered that it does not hold the script (`NOSCRIPT`: a restart without
 * persistence, `SCRIPT FLUSH`, a failover to a replica that never had it): `EVAL` with the
 * source then runs the call and caches the script again. Both Redis stores fall back so
 * (`runner.ts`, `../redis-rest/store.ts`); such a reply is neither a refusal nor a failure.
 */
export function lostScript(error: unknown): boolean {
  return (error instanceof Error ? error.message : String(error)).startsWith("NOSCRIPT");
}
