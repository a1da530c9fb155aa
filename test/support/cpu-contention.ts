/**
 * CPU contention for tests that are about a busy machine: one busy-loop process per core, so
 * that the processes under test get a share of the CPU instead of a core each, and their event
 * loops lag as they would on a loaded host.
 *
 * Bounded twice: each child stops spinning by itself after `maxMs` (even if the test process is
 * killed with SIGKILL and cannot clean up), and `stop()` (call it from afterAll) or the test
 * process's exit kills them with SIGKILL.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { availableParallelism, setPriority } from "node:os";

export interface CpuContention {
  /** The busy processes' ids, for the report. */
  readonly pids: readonly number[];
  /** Kills every busy process and resolves once they have exited. Safe to call twice. */
  stop(): Promise<void>;
}

export interface CpuContentionOptions {
  /** Busy processes to start (default: one per core, `os.availableParallelism()`). */
  readonly processes?: number;
  /** Each process exits by itself after this long (default 5 minutes). */
  readonly maxMs?: number;
}

export async function startCpuContention(
  options: CpuContentionOptions = {},
): Promise<CpuContention> {
  const count = options.processes ?? availableParallelism();
  const maxMs = options.maxMs ?? 5 * 60_000;
  // The loop reads the clock so that it ends by itself: no timer can fire inside `for (;;)`.
  const program = `const end = Date.now() + ${Math.round(maxMs)}; while (Date.now() < end) {}`;
  const children: ChildProcess[] = [];
  const killAll = (): void => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  };
  // Synchronous, so it also runs when the test process exits on an uncaught error.
  process.once("exit", killAll);
  for (let i = 0; i < count; i++) {
    const child = spawn(process.execPath, ["-e", program], { stdio: "ignore" });
    children.push(child);
  }
  await Promise.all(children.map((child) => once(child, "spawn")));
  let stopped: Promise<void> | undefined;
  return {
    pids: children.map((child) => child.pid as number),
    stop() {
      stopped ??= (async () => {
        process.off("exit", killAll);
        const exits = children
          .filter((child) => child.exitCode === null && child.signalCode === null)
          .map((child) => once(child, "exit"));
        killAll();
        await Promise.all(exits);
      })();
      return stopped;
    },
  };
}

/**
 * Lets a store process (redis-server) take the CPU when it needs it, ahead of the busy
 * processes: in production the store runs on machines of its own, and these tests are about
 * our processes being starved, not the store. Needs root for a raised priority (CI runs as
 * root); elsewhere the store keeps its priority and the tests are harsher.
 */
export function favourStore(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    setPriority(pid, -10);
  } catch {
    // Not permitted here: the store competes with the busy processes like everything else.
  }
}
