/**
 * The bench's side of the gRPC load generator (grpc-load-process.ts): starts it in its own
 * process, pinned to the last core when `taskset` is there and the machine has two or more,
 * and hands it one order at a time.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export type LoadOrder = (
  | {
      readonly kind: "saturate";
      readonly port: number;
      readonly pid: number;
      readonly seconds: number;
      readonly inFlight: number;
      /** Stop after this many calls (default: when `seconds` are over). */
      readonly total?: number;
    }
  | {
      readonly kind: "rate";
      readonly port: number;
      readonly pid: number;
      readonly rate: number;
      readonly seconds: number;
    }
) & {
  /** gRPC `ShouldRateLimit` (the default), or nginx's `/check` over HTTP/1.1. */
  readonly protocol?: "grpc" | "check";
};

export interface LoadResult {
  /** Calls answered. */
  readonly calls: number;
  /** Calls answered with a gRPC status other than OK, or not answered. */
  readonly failed: number;
  readonly seconds: number;
  /** The server process's CPU seconds (utime + stime) while the calls ran. */
  readonly serverCpu: number;
  /** Open loop only, in ms: from the moment each call fell due; `lateP99`: the timer's lateness. */
  readonly latency:
    | { readonly p50: number; readonly p99: number; readonly lateP99: number }
    | undefined;
}

const here = dirname(fileURLToPath(import.meta.url));
const hasTaskset = (() => {
  try {
    execFileSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

/**
 * The cores the bench gives the servers it measures and its load generator; none with
 * RLS_BENCH_PIN=0 (on a machine others share, a pinned server waits for its core while the
 * other may be free: pinning keeps the load generator's CPU off the server's, and costs latency).
 */
export const CORES =
  cpus().length >= 2 && hasTaskset && process.env.RLS_BENCH_PIN !== "0"
    ? { server: 0, load: cpus().length - 1 }
    : undefined;

/** `argv` run on `core` (through `taskset`, which execs it: the pid stays the program's). */
export function pinned(core: "server" | "load", argv: readonly string[]): string[] {
  return CORES === undefined ? [...argv] : ["taskset", "-c", String(CORES[core]), ...argv];
}

export interface GrpcLoad {
  run(order: LoadOrder): Promise<LoadResult>;
  close(): void;
}

export async function startGrpcLoad(): Promise<GrpcLoad> {
  const argv = pinned("load", [
    process.execPath,
    "--import",
    "tsx",
    join(here, "grpc-load-process.ts"),
  ]);
  const child: ChildProcess = spawn(argv[0] as string, argv.slice(1), {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`the load generator exited ${code}`)));
  });
  return {
    run: (order) =>
      new Promise<LoadResult>((resolve, reject) => {
        child.once("message", (reply: LoadResult | { error: string }) =>
          "error" in reply ? reject(new Error(reply.error)) : resolve(reply),
        );
        child.send(order);
      }),
    close: () => {
      child.kill();
    },
  };
}
