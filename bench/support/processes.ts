/**
 * Child processes for the benchmarks that run servers: a free loopback port, a server started
 * and waited for, all of them stopped at the end, and a process's CPU time.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

const CLOCK_TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }));
const children: ChildProcess[] = [];

export interface Server {
  readonly port: number;
  readonly pid: number;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts `argv` and resolves once something answers HTTP on `port` (any status). */
export async function startServer(
  port: number,
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Server> {
  const child = spawn(argv[0] as string, argv.slice(1), {
    stdio: ["ignore", "ignore", "inherit"],
    env,
  });
  children.push(child);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await (await fetch(`http://127.0.0.1:${port}/ready`)).arrayBuffer();
      return { port, pid: child.pid as number };
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`${argv.join(" ")}: nothing answered on port ${port}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Starts `argv`, which prints the port it listens on as its first line. */
export async function startPrinting(argv: readonly string[]): Promise<Server> {
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`${argv.join(" ")}: no port in 30 s`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (!output.includes("\n")) return;
      clearTimeout(timer);
      resolve(Number(output.split("\n")[0]));
    });
    child.once("exit", (code) => reject(new Error(`${argv.join(" ")} exited ${code}`)));
  });
  return { port, pid: child.pid as number };
}

/** Stops every server started here: SIGTERM, then SIGKILL after 12 s. */
export async function stopServers(): Promise<void> {
  const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => child.kill("SIGKILL"), 12_000);
          child.once("exit", () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill("SIGTERM");
        }),
    ),
  );
}

/** utime + stime of a process, in seconds (/proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may hold spaces: the fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}
