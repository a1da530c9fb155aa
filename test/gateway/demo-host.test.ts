/**
 * `npm start` runs `edgelimit serve --demo`, whose demo origin mints tokens for any plan: it
 * listens on this machine only unless `--host` says otherwise, and says so. Whether a listener
 * is on 127.0.0.1 or on every address is told by 127.0.0.2, another loopback address: a socket
 * bound to 0.0.0.0 answers there, one bound to 127.0.0.1 refuses.
 */
import type { ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { spawnServe } from "../support/serve-process.js";
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
async function startDemo(host: string | null) {
  const port = await closedPort();
  const served = spawnServe({
    policy: "examples/policies/cloudfront.yaml",
    port,
    adminPort: await closedPort(),
    host,
  });
  children.push(served.child);
  const deadline = Date.now() + 20_000;
  while (!served.output().includes('"msg":"gateway started"')) {
    if (Date.now() > deadline || served.child.exitCode !== null)
      throw new Error(`the demo did not start; output:\n${served.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, output: served.output() };
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
    const { port, output } = await startDemo(null);
    expect(output).toContain(`edgelimit gateway on http://127.0.0.1:${port}/`);
    expect(output).toContain("demo: listening on 127.0.0.1 only, this machine (--host 0.0.0.0");
    expect(await answers("127.0.0.1", port)).toBe(true);
    expect(await answers("127.0.0.2", port)).toBe(false);
  }, 30_000);

  it("listens where --host says, warning that anyone there can mint tokens", async () => {
    const { port, output } = await startDemo("0.0.0.0");
    expect(output).toContain(
      "demo: WARNING: listening on 0.0.0.0: anyone who reaches it can mint tokens for any plan",
    );
    expect(await answers("127.0.0.2", port)).toBe(true);
  }, 30_000);
});
