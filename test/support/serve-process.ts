import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";

export interface ServeProcess {
  readonly child: ChildProcess;
  /** Everything the gateway printed so far. */
  output(): string;
}

/**
 * The real `edgelimit serve` CLI in a child process, on loopback, its output captured: from
 * `src` through tsx, or with `built` from `dist/cli/main.js` as users run it (`npm run build`
 * first). Without `upstream` the gateway starts its built-in demo origin (`--demo`).
 */
export function spawnServe(options: {
  readonly policy: string;
  readonly upstream?: string;
  readonly built?: boolean;
  /** 0 (the default): a port the system picks, printed in the "gateway started" line. */
  readonly port?: number;
  readonly adminPort?: number;
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /** `--host` (default 127.0.0.1); `null` leaves it out, for the CLI's own default. */
  readonly host?: string | null;
}): ServeProcess {
  const child = spawn(
    process.execPath,
    [
      ...(options.built === true ? ["dist/cli/main.js"] : ["--import", "tsx", "src/cli/main.ts"]),
      "serve",
      "--policy",
      options.policy,
      ...(options.upstream === undefined ? ["--demo"] : ["--upstream", options.upstream]),
      "--port",
      String(options.port ?? 0),
      "--admin-port",
      String(options.adminPort ?? 0),
      ...(options.host === null ? [] : ["--host", options.host ?? "127.0.0.1"]),
      ...(options.args ?? []),
    ],
    { env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const capture = (chunk: Buffer) => {
    output += chunk.toString("utf8");
  };
  child.stdout?.on("data", capture);
  child.stderr?.on("data", capture);
  return { child, output: () => output };
}

export interface StartedServe extends ServeProcess {
  /** `http://127.0.0.1:<port>`: the public port. */
  readonly base: string;
  /** `http://127.0.0.1:<admin port>`. */
  readonly admin: string;
  /** SIGTERM, SIGKILL after 3 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

/**
 * `spawnServe` on ports the system picks, resolved once the gateway printed "gateway started"
 * (the ports are read from that line): a port found free and handed to a child may be taken,
 * before the child binds it, by a server another test file starts.
 */
export async function startServe(
  options: Omit<Parameters<typeof spawnServe>[0], "port" | "adminPort">,
  startTimeoutMs = 20_000,
): Promise<StartedServe> {
  const served = spawnServe(options);
  const { child } = served;
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, "exit");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    child.kill("SIGTERM");
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    const ports = startedPorts(served.output());
    if (ports !== undefined) {
      return {
        ...served,
        base: `http://127.0.0.1:${ports.port}`,
        admin: `http://127.0.0.1:${ports.adminPort}`,
        stop,
      };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`edgelimit serve did not start; output:\n${served.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The ports of the gateway's "gateway started" line in `output`, once it printed one. */
export function startedPorts(output: string): { port: number; adminPort: number } | undefined {
  for (const line of output.split("\n")) {
    if (!line.includes('"msg":"gateway started"')) continue;
    const started = JSON.parse(line) as { port: number; adminPort: number };
    return { port: started.port, adminPort: started.adminPort };
  }
  return undefined;
}
