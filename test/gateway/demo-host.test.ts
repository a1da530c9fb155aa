/**
 * `npm start` runs `edgelimit serve --demo`, whose demo origin mints tokens for any plan: it
 * listens on this machine only unless `--host` says otherwise, and says so. Whether a listener
 * is on 127.0.0.1 or on every address is told by 127.0.0.2, another loopback address: a socket
 * bound to 0.0.0.0 answers there, one bound to 127.0.0.1 refuses.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { closedPort } from "./helpers.js";

const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) {
      child.kill("SIGKILL");
      await new Promise((resolve) => child.once("exit", resolve));
    }
  }
});

/** `npm start`'s command line (without `--host` unless given), started and its banner read. */
async function startDemo(extra: readonly string[] = []) {
  const port = await closedPort();
  const adminPort = await closedPort();
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "serve",
      "--demo",
      "--policy",
      "examples/policies/cloudfront.yaml",
      "--port",
      String(port),
      "--admin-port",
      String(adminPort),
      ...extra,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const deadline = Date.now() + 20_000;
  while (!output.includes('"msg":"gateway started"')) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`the demo did not start; output:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, output };
}

function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

describe("serve --demo (npm start)", () => {
  it("listens on 127.0.0.1 only, and prints a line saying so", async () => {
    const { port, output } = await startDemo();
    expect(output).toContain(`edgelimit gateway on http://127.0.0.1:${port}/`);
    expect(output).toContain("demo: listening on 127.0.0.1 only, this machine (--host 0.0.0.0");
    expect(await answers("127.0.0.1", port)).toBe(true);
    expect(await answers("127.0.0.2", port)).toBe(false);
  }, 30_000);

  it("listens where --host says, warning that anyone there can mint tokens", async () => {
    const { port, output } = await startDemo(["--host", "0.0.0.0"]);
    expect(output).toContain(
      "demo: WARNING: listening on 0.0.0.0: anyone who reaches it can mint tokens for any plan",
    );
    expect(await answers("127.0.0.2", port)).toBe(true);
  }, 30_000);
});
