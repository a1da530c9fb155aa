/**
 * Load and accounting for the Redis benchmarks (redis.bench.ts, redis-cluster.bench.ts):
 * closed-loop callers, and what each decision cost the bench process and redis-server in CPU
 * time, read from `process.cpuUsage()` and `INFO cpu` of every node.
 */
import type { Redis } from "ioredis";
import type { CounterSpec } from "../../src/core/types.js";

export type Operation = (caller: number, i: number) => Promise<unknown>;

/** What one run of an operation cost. */
export interface Run {
  readonly decisions: number;
  readonly perSecond: number;
  /** CPU time of the bench process (the callers and the client library) per decision, µs. */
  readonly clientMicros: number;
  /** CPU time of redis-server (every node) per decision, µs. */
  readonly serverMicros: number;
}

const DISTINCT_ADDRESSES = 10_000;

/** A caller's i-th client address, cycling through 10,000 of them. */
export function addressFor(caller: number, i: number): string {
  const n = (caller * 7919 + i * 104_729) % DISTINCT_ADDRESSES;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** One fixed-window counter of `limit` a minute for this address, as the limiter builds it. */
export function counterFor(address: string, limit: number): CounterSpec {
  const subject = `ip:${address}`;
  return {
    key: `${subject}|default|global`,
    subject,
    algorithm: "fixed-window",
    limit,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: "anonymous.global",
    namespace: "default",
  };
}

/** redis-server CPU time (user and system) summed over `nodes`, µs. */
export async function serverCpuMicros(nodes: readonly Redis[]): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    const info = await node.info("cpu");
    const user = Number(/^used_cpu_user:([\d.]+)/m.exec(info)?.[1] ?? 0);
    const system = Number(/^used_cpu_sys:([\d.]+)/m.exec(info)?.[1] ?? 0);
    total += (user + system) * 1e6;
  }
  return total;
}

/** What the bench itself sends to read or reset the statistics: not a decision's work. */
const MEASURING = new Set(["info", "config", "flushall", "ping"]);

/**
 * Calls and server time (µs) of every command since `CONFIG RESETSTAT` but the bench's own:
 * script calls (FCALL, EVALSHA, EVAL), the fixed windows' INCRBY and PEXPIRE, a peer's
 * commands, the store's TIME samples.
 */
export async function serverTime(node: Redis): Promise<{ calls: number; micros: number }> {
  const info = await node.info("commandstats");
  let calls = 0;
  let micros = 0;
  for (const match of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/gm)) {
    if (MEASURING.has(match[1] as string)) continue;
    calls += Number(match[2]);
    micros += Number(match[3]);
  }
  return { calls, micros };
}

/**
 * Runs `operation` from `callers` concurrent loops, each waiting for its previous call: for
 * `seconds` after a warm-up of `warmupMs` (when `seconds` is given), or `decisions` in all.
 */
export async function runCallers(
  callers: number,
  operation: Operation,
  nodes: readonly Redis[],
  until: { seconds: number; warmupMs: number } | { decisions: number },
): Promise<Run> {
  let counting = !("seconds" in until);
  let stopAt = "seconds" in until ? performance.now() + until.warmupMs : Number.POSITIVE_INFINITY;
  let remaining = "decisions" in until ? until.decisions : Number.POSITIVE_INFINITY;
  let completed = 0;
  const loop = async (caller: number): Promise<void> => {
    for (let i = 0; ; i++) {
      if (performance.now() >= stopAt && counting) return;
      if (remaining-- <= 0) return;
      await operation(caller, i);
      if (counting) completed++;
    }
  };
  let started = performance.now();
  let cpu = process.cpuUsage();
  let server = await serverCpuMicros(nodes);
  const loops = Array.from({ length: callers }, (_, caller) => loop(caller));
  if ("seconds" in until) {
    await new Promise((resolve) => setTimeout(resolve, until.warmupMs));
    server = await serverCpuMicros(nodes);
    started = performance.now();
    cpu = process.cpuUsage();
    counting = true;
    stopAt = started + until.seconds * 1000;
  }
  await Promise.all(loops);
  const elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const serverUsed = (await serverCpuMicros(nodes)) - server;
  return {
    decisions: completed,
    perSecond: completed / elapsed,
    clientMicros: (used.user + used.system) / completed,
    serverMicros: serverUsed / completed,
  };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Each round's value over the peer's in the same round, then their median. */
export function medianRatio(values: readonly number[], peer: readonly number[]): number {
  return median(values.map((value, round) => value / (peer[round] ?? Number.NaN)));
}

export function formatNumber(value: number, digits = 0): string {
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/**
 * The throughput table: each contender's median rate and CPU times per decision, and ratios to
 * the first contender (the peer), taken within each round.
 */
export function throughputTable(
  runs: ReadonlyMap<string, readonly Run[]>,
  perRound: boolean,
): string {
  const peer = [...runs.values()][0] ?? [];
  const ratio = (values: readonly Run[], of: (run: Run) => number) =>
    `${medianRatio(values.map(of), peer.map(of)).toFixed(2)}x`;
  const rows = [...runs].map(([name, values]) => [
    name,
    formatNumber(median(values.map((run) => run.perSecond))),
    ratio(values, (run) => run.perSecond),
    formatNumber(median(values.map((run) => run.clientMicros)), 1),
    formatNumber(median(values.map((run) => run.serverMicros)), 1),
    ratio(values, (run) => run.serverMicros),
    ...(perRound
      ? [
          values
            .map((run, round) => `${(run.perSecond / (peer[round]?.perSecond ?? 1)).toFixed(2)}x`)
            .join(" "),
        ]
      : []),
  ]);
  return table(
    [
      "scenario",
      "median/s",
      "vs peer",
      "client µs",
      "redis µs",
      "redis vs peer",
      ...(perRound ? ["rate vs peer, per round"] : []),
    ],
    rows,
  );
}

/** A plain-text table: the first column left-aligned, the others right-aligned. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((cell, column) =>
    Math.max(cell.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (row: readonly string[]) =>
    row
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join("  ");
  return `${[line(header), ...rows.map(line)].join("\n")}\n`;
}
