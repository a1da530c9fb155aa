import { type ChildProcess, spawn } from "node:child_process";

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
  readonly port: number;
  readonly adminPort: number;
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
      String(options.port),
      "--admin-port",
      String(options.adminPort),
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
