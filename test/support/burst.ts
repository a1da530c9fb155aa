/**
 * Bursts against real gateways: `edgelimit serve` processes started from the build, and
 * bursts of concurrent requests from one client address fired at them over keep-alive pools
 * with enough connections that every request of a burst is in flight at once. Shared by
 * test/redis/burst.test.ts and bench/burst.bench.ts.
 */
import { Pool } from "undici";
import { startServe } from "./serve-process.js";

export const CLOUDFRONT_POLICY = "examples/policies/cloudfront.yaml";

export interface BurstGateway {
  readonly pid: number;
  /** `http://127.0.0.1:PORT` of the public listener. */
  readonly base: string;
  /** `http://127.0.0.1:PORT` of the admin listener (`/metrics`). */
  readonly adminBase: string;
  /** Everything the process printed so far. */
  output(): string;
  /** The admin listener's `/metrics` text. */
  scrape(): Promise<string>;
  /** SIGTERM, SIGKILL after 3 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

/**
 * `node dist/cli/main.js serve --demo` on free loopback ports (port 0, read back from the
 * "gateway started" log line), with the given store URL. Decisions are logged only for
 * refusals and failures (`--log-sample 0`).
 */
export async function startBurstGateway(options: {
  readonly store: string;
  readonly policy?: string;
  readonly startTimeoutMs?: number;
}): Promise<BurstGateway> {
  const served = await startServe(
    {
      policy: options.policy ?? CLOUDFRONT_POLICY,
      built: true,
      args: ["--store", options.store, "--log-sample", "0"],
    },
    options.startTimeoutMs,
  );
  const child = served.child;
  const killOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);
  return {
    pid: child.pid as number,
    base: served.base,
    adminBase: served.admin,
    output: served.output,
    scrape: async () => {
      const response = await fetch(`${served.admin}/metrics`, {
        signal: AbortSignal.timeout(10_000),
      });
      return response.text();
    },
    stop: async () => {
      process.off("exit", killOnExit);
      await served.stop();
    },
  };
}

/** A keep-alive pool to `base` that can hold `connections` requests in flight at once. */
export function burstPool(base: string, connections: number): Pool {
  return new Pool(base, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: 20_000,
    bodyTimeout: 20_000,
    connectTimeout: 10_000,
  });
}

export interface BurstResult {
  readonly size: number;
  /** Answers by status; 0 counts requests that got no answer (timeout, reset). */
  readonly statuses: Readonly<Record<number, number>>;
  /** 200 answers. */
  readonly admitted: number;
  /** From sending each request to its response headers, as the client saw it, sorted. */
  readonly latenciesMs: readonly number[];
  /** From the first request sent to the last answer read. */
  readonly elapsedMs: number;
}

/**
 * `size` requests for `path` with `X-Forwarded-For: ip`, all sent at once, request i to pool
 * i mod pools.length. Never throws for a failed request (it counts as status 0); each request is
 * bounded by the pool's timeouts.
 */
export async function fireBurst(
  pools: readonly Pool[],
  options: { readonly size: number; readonly path: string; readonly ip: string },
): Promise<BurstResult> {
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: options.size }, async (_, index) => {
      const pool = pools[index % pools.length] as Pool;
      const sentAt = performance.now();
      try {
        const response = await pool.request({
          path: options.path,
          method: "GET",
          headers: { "x-forwarded-for": options.ip },
        });
        const latencyMs = performance.now() - sentAt;
        await response.body.dump();
        return { status: response.statusCode, latencyMs };
      } catch {
        return { status: 0, latencyMs: performance.now() - sentAt };
      }
    }),
  );
  const elapsedMs = performance.now() - started;
  const statuses: Record<number, number> = {};
  for (const { status } of answers) statuses[status] = (statuses[status] ?? 0) + 1;
  return {
    size: options.size,
    statuses,
    admitted: statuses[200] ?? 0,
    latenciesMs: answers.map(({ latencyMs }) => latencyMs).sort((a, b) => a - b),
    elapsedMs,
  };
}

/** Sum of every sample of `name` (any labels) in a Prometheus text exposition. */
export function metricValue(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

/** Cumulative bucket counts of a histogram, by upper bound in seconds (`+Inf` last). */
export function histogramBuckets(text: string, name: string): [number, number][] {
  const buckets: [number, number][] = [];
  const prefix = `${name}_bucket{le="`;
  for (const line of text.split("\n")) {
    if (!line.startsWith(prefix)) continue;
    const bound = line.slice(prefix.length, line.indexOf('"', prefix.length));
    buckets.push([
      bound === "+Inf" ? Number.POSITIVE_INFINITY : Number(bound),
      Number(line.slice(line.lastIndexOf(" ") + 1)),
    ]);
  }
  return buckets.sort((a, b) => a[0] - b[0]);
}

/** The value at quantile `q` (0..1) of sorted numbers, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** A client address of its own for burst `index` of a run (each burst starts from zero). */
export function burstAddress(run: number, index: number): string {
  return `10.${run}.${(index >> 8) & 255}.${index & 255}`;
}
