/**
 * The load generator of bench/rls.bench.ts, in a process of its own (the bench pins it with
 * `taskset` to the core the service is not on), so that what it spends is not taken from the
 * service it measures. It takes its orders over IPC (grpc-load.ts is the other side) and writes
 * pre-encoded `ShouldRateLimit` calls as bare HTTP/2 frames on one connection
 * (h2-raw-client.ts), after one call through node:http2 whose `grpc-status` must be 0. The
 * server's CPU time is read here, from `/proc/<pid>/stat`, right before the first call and
 * right after the last answer.
 */
import { connect } from "node:http2";
import { performance } from "node:perf_hooks";
import type { LoadOrder, LoadResult } from "./grpc-load.js";
import { rawH2Client } from "./h2-raw-client.js";
import { rawHttp1Client } from "./http1-raw-client.js";
import { cpuSeconds } from "./processes.js";
import { checkRequests, framedCalls } from "./rls-calls.js";

const calls = framedCalls();
const checks = checkRequests();
/** `/check` over HTTP/1.1: connections open, one request in flight on each. */
const CHECK_CONNECTIONS = 64;

interface Client {
  /** Sends the index-th client's call; `done(true)` once it was answered as it should be. */
  call(index: number, done: (ok: boolean) => void): void;
  close(): void;
}
const HEADERS = {
  ":method": "POST",
  ":path": "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
  "content-type": "application/grpc",
  te: "trailers",
};

/** One call through node:http2, which reads its trailers: the server answers OK. */
async function checkedOnce(port: number): Promise<void> {
  const session = connect(`http://127.0.0.1:${port}`);
  session.on("error", () => undefined);
  const status = await new Promise<unknown>((resolve) => {
    const stream = session.request(HEADERS);
    let seen: unknown;
    stream.on("trailers", (trailers) => {
      seen = trailers["grpc-status"];
    });
    stream.on("response", (headers) => {
      seen ??= headers["grpc-status"];
    });
    stream.on("data", () => undefined);
    stream.on("error", () => undefined);
    stream.on("close", () => resolve(seen));
    stream.end(calls[0]);
  });
  session.close();
  if (status !== "0") throw new Error(`the server answered grpc-status ${String(status)}`);
}

async function session(order: LoadOrder): Promise<Client> {
  if (order.protocol === "check") {
    const client = await rawHttp1Client(order.port, CHECK_CONNECTIONS);
    return {
      call: (index, done) => client.call(checks[index % checks.length] as Buffer, done),
      close: () => client.close(),
    };
  }
  await checkedOnce(order.port);
  const client = await rawH2Client(order.port, HEADERS[":path"]);
  return {
    call: (index, done) => client.call(calls[index % calls.length] as Buffer, done),
    close: () => client.close(),
  };
}

/** `inFlight` calls at all times, for `seconds` or until `total` calls are answered. */
async function closedLoop(order: Extract<LoadOrder, { kind: "saturate" }>): Promise<LoadResult> {
  const client = await session(order);
  const total = order.total ?? Number.POSITIVE_INFINITY;
  let next = 0;
  let answered = 0;
  let failed = 0;
  const cpuBefore = cpuSeconds(order.pid);
  const started = performance.now();
  const until = started + order.seconds * 1000;
  await new Promise<void>((resolve) => {
    let running = 0;
    const launch = (): void => {
      running++;
      client.call(next++, (ok) => {
        running--;
        answered++;
        if (!ok) failed++;
        if (next < total && performance.now() < until) launch();
        else if (running === 0) resolve();
      });
    };
    for (let i = 0; i < order.inFlight && i < total; i++) launch();
  });
  const seconds = (performance.now() - started) / 1000;
  const serverCpu = cpuSeconds(order.pid) - cpuBefore;
  client.close();
  return { calls: answered, failed, seconds, serverCpu, latency: undefined };
}

/**
 * Open loop: calls fall due at `rate` per second whatever the server's pace, sent from a 1 ms
 * timer (no spin: the generator sleeps between ticks). Latency runs from the moment a call fell
 * due, so a server that falls behind shows as latency, not as a lower rate; the timer's own
 * lateness (at most about a millisecond) is in it too, and reported apart as `late`.
 */
async function openLoop(order: Extract<LoadOrder, { kind: "rate" }>): Promise<LoadResult> {
  const client = await session(order);
  const total = Math.round(order.rate * order.seconds);
  const fromDue: number[] = [];
  const late: number[] = [];
  let failed = 0;
  let sent = 0;
  const cpuBefore = cpuSeconds(order.pid);
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const deadline = setTimeout(resolve, order.seconds * 1000 + 10_000);
    const timer = setInterval(() => {
      const now = performance.now();
      const due = Math.min(total, Math.floor(((now - started) * order.rate) / 1000));
      for (; sent < due; sent++) {
        const dueAt = started + (sent * 1000) / order.rate;
        late.push(now - dueAt);
        client.call(sent, (ok) => {
          fromDue.push(performance.now() - dueAt);
          if (!ok) failed++;
          if (fromDue.length === total) {
            clearTimeout(deadline);
            resolve();
          }
        });
      }
      if (sent === total) clearInterval(timer);
    }, 1);
  });
  const seconds = (performance.now() - started) / 1000;
  const serverCpu = cpuSeconds(order.pid) - cpuBefore;
  client.close();
  failed += total - fromDue.length;
  return {
    calls: fromDue.length,
    failed,
    seconds,
    serverCpu,
    latency: { p50: at(fromDue, 0.5), p99: at(fromDue, 0.99), lateP99: at(late, 0.99) },
  };
}

function at(values: number[], share: number): number {
  values.sort((a, b) => a - b);
  return values[Math.min(values.length - 1, Math.floor(share * values.length))] ?? Number.NaN;
}

process.on("message", (order: LoadOrder) => {
  const running = order.kind === "saturate" ? closedLoop(order) : openLoop(order);
  running.then(
    (result) => process.send?.(result),
    (error: unknown) => process.send?.({ error: String(error) }),
  );
});
process.send?.("ready");
