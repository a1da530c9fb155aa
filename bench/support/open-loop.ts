/**
 * An open-loop HTTP/1.1 load generator for bench/gateway.bench.ts: requests fall due at a fixed
 * rate whatever the server's pace, on a pool of keep-alive connections with one request in
 * flight on each. Latency runs from the moment a request fell due (a request that waits for a
 * free connection counts its wait) to the end of its response, so a slow server shows as
 * latency rather than as a lower rate (no coordinated omission).
 */
import { connect } from "node:net";
import { performance } from "node:perf_hooks";

export interface OpenLoopOptions {
  readonly port: number;
  readonly rate: number;
  readonly seconds: number;
  readonly connections: number;
  /** The raw text of the index-th request. */
  readonly request: (index: number) => string;
}

export interface OpenLoopResult {
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export async function openLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const total = Math.round(options.rate * options.seconds);
  const latencies: number[] = [];
  const idle: { send: (dueAt: number) => void }[] = [];
  const backlog: number[] = [];
  let issued = 0;
  let finish = () => {};
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const sockets = await Promise.all(
    Array.from({ length: options.connections }, async () => {
      const socket = connect(options.port, "127.0.0.1").setNoDelay(true);
      await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      let dueAt = 0;
      let pending: Buffer = Buffer.alloc(0);
      const connection = {
        send(due: number) {
          dueAt = due;
          socket.write(options.request(issued++));
        },
      };
      socket.on("data", (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        for (let end = responseEnd(pending); end !== undefined; end = responseEnd(pending)) {
          pending = pending.subarray(end);
          latencies.push(performance.now() - dueAt);
          if (latencies.length === total) finish();
          const waiting = backlog.shift();
          if (waiting !== undefined) connection.send(waiting);
          else idle.push(connection);
        }
      });
      idle.push(connection);
      return socket;
    }),
  );
  const startedAt = performance.now();
  let due = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const dueNow = Math.min(total, ((now - startedAt) * options.rate) / 1000);
    for (; due < dueNow; due++) {
      const connection = idle.pop();
      if (connection !== undefined) connection.send(now);
      else backlog.push(now);
    }
  }, 1);
  const deadline = setTimeout(finish, options.seconds * 1000 + 10_000);
  await finished;
  clearTimeout(deadline);
  clearInterval(timer);
  for (const socket of sockets) socket.destroy();
  latencies.sort((a, b) => a - b);
  const at = (share: number) => latencies[Math.floor(latencies.length * share)] ?? Number.NaN;
  return { p50Ms: at(0.5), p99Ms: at(0.99) };
}

/** Where the first complete response in `buffer` ends, or undefined while it is incomplete. */
function responseEnd(buffer: Buffer): number | undefined {
  const headerEnd = buffer.indexOf("\r\n\r\n");
  if (headerEnd < 0) return undefined;
  const head = buffer.toString("latin1", 0, headerEnd).toLowerCase();
  if (head.includes("\r\ntransfer-encoding: chunked")) {
    const last = buffer.indexOf("0\r\n\r\n", headerEnd + 4);
    return last < 0 ? undefined : last + 5;
  }
  const end = headerEnd + 4 + Number(/\r\ncontent-length:\s*(\d+)/.exec(head)?.[1] ?? 0);
  return buffer.length >= end ? end : undefined;
}
