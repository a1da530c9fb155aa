/**
 * Debian's nginx, Caddy and HAProxy, each started with its configuration from examples/rls/ as
 * docs/forward-auth.md shows it, with only the ports changed: the proxy's own (80 in the examples),
 * the app's (3000) and rls's HTTP port (8080); HAProxy also gets the path of edgelimit.lua.
 * A replacement that no longer finds its text fails the test, so an example cannot drift away
 * from what the tests run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closedPort } from "../gateway/helpers.js";

export type ProxyKind = "nginx" | "caddy" | "haproxy";

export const PROXY_NAMES: Readonly<Record<ProxyKind, string>> = {
  nginx: "nginx (auth_request)",
  caddy: "Caddy (forward_auth)",
  haproxy: "HAProxy (Lua action)",
};

/** Where a proxy sends its requests: the app's and rls's HTTP port, on 127.0.0.1. */
export interface ProxyTargets {
  readonly appPort: number;
  readonly rlsPort: number;
}

/** Starts proxies in folders under `dir`; `stopAll` ends every one it started. */
export class ProxyLauncher {
  readonly #dir: string;
  readonly #children: ChildProcess[] = [];
  #count = 0;

  constructor(dir: string) {
    this.#dir = dir;
  }

  /**
   * Starts one proxy of `kind` in front of `targets`; resolves to its base URL once it answers.
   * With `host`, the proxy's address is written in front of its port, as someone who wants it
   * on one address would (Caddy: `http://127.0.0.1:PORT`); `withoutLines` drops the lines of
   * the main configuration file that contain any of these texts.
   */
  async start(
    kind: ProxyKind,
    targets: ProxyTargets,
    options: { readonly host?: string; readonly withoutLines?: readonly string[] } = {},
  ): Promise<string> {
    const { host, withoutLines = [] } = options;
    const port = await closedPort();
    const listen = host === undefined ? String(port) : `${host}:${port}`;
    const home = join(this.#dir, `${kind}-${this.#count++}`);
    mkdirSync(join(home, "logs"), { recursive: true });
    if (kind === "nginx") {
      const conf = join(home, "nginx.conf");
      writeFileSync(
        conf,
        example("nginx.conf", targets, [["listen 80;", `listen ${listen};`]], withoutLines),
      );
      const global = `daemon off; pid ${join(home, "nginx.pid")};`;
      return this.#launch(
        "nginx",
        ["-p", home, "-c", conf, "-e", "stderr", "-g", global],
        port,
        {},
      );
    }
    if (kind === "caddy") {
      const conf = join(home, "Caddyfile");
      writeFileSync(
        conf,
        example("Caddyfile", targets, [[":80 {", `${host ?? ""}:${port} {`]], withoutLines),
      );
      return this.#launch("caddy", ["run", "--config", conf, "--adapter", "caddyfile"], port, {
        HOME: home,
        XDG_DATA_HOME: home,
        XDG_CONFIG_HOME: home,
      });
    }
    const lua = join(home, "edgelimit.lua");
    writeFileSync(lua, example("edgelimit.lua", targets));
    const conf = join(home, "haproxy.cfg");
    writeFileSync(
      conf,
      example(
        "haproxy.cfg",
        targets,
        [
          ["/etc/haproxy/edgelimit.lua", lua],
          ["bind :80", `bind ${host ?? ""}:${port}`],
        ],
        withoutLines,
      ),
    );
    return this.#launch("haproxy", ["-f", conf, "-db"], port, {});
  }

  async stopAll(): Promise<void> {
    for (const child of this.#children) child.kill("SIGTERM");
    await Promise.all(
      this.#children.map((child) =>
        child.exitCode === null && child.signalCode === null
          ? new Promise((resolve) => child.once("exit", resolve))
          : null,
      ),
    );
  }

  /** Starts a proxy process and waits until its port answers. */
  async #launch(
    command: string,
    args: string[],
    port: number,
    env: Record<string, string>,
  ): Promise<string> {
    let output = "";
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    this.#children.push(child);
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(`${command} exited ${child.exitCode}:\n${output}`);
      }
      try {
        await fetch(`${url}/ready`, { headers: { "x-forwarded-for": "192.0.2.250" } });
        return url;
      } catch {
        if (Date.now() > deadline) {
          throw new Error(`${command} did not listen on ${port}:\n${output}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }
}

/** The example file with its ports replaced by the test's; every replacement must apply. */
function example(
  name: string,
  targets: ProxyTargets,
  replace: readonly (readonly [string, string])[] = [],
  withoutLines: readonly string[] = [],
): string {
  let text = readFileSync(join("examples/rls", name), "utf8");
  for (const line of withoutLines) {
    if (!text.includes(line)) throw new Error(`examples/rls/${name} no longer contains "${line}"`);
  }
  text = text
    .split("\n")
    .filter((line) => !withoutLines.some((dropped) => line.includes(dropped)))
    .join("\n");
  const ports = [
    ["127.0.0.1:3000", `127.0.0.1:${targets.appPort}`],
    ["127.0.0.1:8080", `127.0.0.1:${targets.rlsPort}`],
  ] as const;
  // edgelimit.lua talks to rls only.
  const app = name === "edgelimit.lua" ? ports.slice(1) : ports;
  for (const [from, to] of [...app, ...replace]) {
    if (!text.includes(from)) throw new Error(`examples/rls/${name} no longer contains "${from}"`);
    text = text.replaceAll(from, to);
  }
  return text;
}
