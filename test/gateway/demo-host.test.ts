/**
 * `npm start` runs `edgelimit serve --demo`, whose demo origin mints tokens for any plan: it
 * listens on this machine only unless `--host` says otherwise, and says so. Whether a listener
 * is on 127.0.0.1 or on every address is told by 127.0.0.2, another loopback address: a socket
 * bound to 0.0.0.0 answers there, one bound to 127.0.0.1 refuses. Its banner's curl line with a
 * forged `X-Forwarded-For` says why it works from this machine only, and a client on another
 * address is shown to be counted by that address whatever it forges.
 */
import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { startServe } from "../support/serve-process.js";
import { withinOneWindow } from "../support/windows.js";

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
  const served = await startServe({ policy: "examples/policies/cloudfront.yaml", host });
  children.push(served.child);
  return { port: Number(new URL(served.base).port), output: served.output() };
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

/** An address of this machine that is not loopback: a peer the demo policy does not trust. */
const external = Object.values(networkInterfaces())
  .flat()
  .find((entry) => entry !== undefined && !entry.internal && entry.family === "IPv4")?.address;

/** The status of GET `path` sent from `from` to `to`, forging `X-Forwarded-For: forged`. */
function statusFrom(from: string, to: string, port: number, path: string, forged: string) {
  return new Promise<number>((resolve, reject) => {
    const sent = request(
      { host: to, port, path, localAddress: from, headers: { "x-forwarded-for": forged } },
      (response) => {
        response.resume();
        response.once("end", () => resolve(response.statusCode ?? 0));
      },
    );
    sent.once("error", reject);
    sent.end();
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

  it("says why its X-Forwarded-For line works on this machine and would not from elsewhere", async () => {
    const { port, output } = await startDemo(null);
    const base = `http://127.0.0.1:${port}`;
    expect(output).toContain(
      [
        `  curl -i -H "X-Forwarded-For: 203.0.113.7" ${base}/api/export   # counted as 203.0.113.7, with its own counters:`,
        "    # only from this machine: the policy trusts X-Forwarded-For from loopback peers (identity.ip.trustedProxies),",
        "    # as it would a proxy on the same machine. A client elsewhere is no trusted proxy: its X-Forwarded-For is",
        "    # ignored and it is counted by its own address, whatever it writes there.",
      ].join("\n"),
    );
    expect(output).not.toContain("another client, its own counters");
  }, 30_000);

  // The banner's claim, tried: from loopback each forged address has its own counters; from an
  // address of this machine that is not loopback, every forged address is the peer itself.
  it.skipIf(external === undefined)(
    "counts a client on another address by that address, whatever X-Forwarded-For it forges",
    async () => {
      const { port } = await startDemo("0.0.0.0");
      // The seed's minute windows on the real clock: the ten requests in one minute.
      await withinOneWindow(60_000, 5_000);
      const fromLoopback: number[] = [];
      const fromElsewhere: number[] = [];
      for (let i = 1; i <= 5; i++) {
        fromLoopback.push(
          await statusFrom("127.0.0.1", "127.0.0.1", port, "/api/export", `203.0.113.${i}`),
        );
        fromElsewhere.push(
          await statusFrom(
            external as string,
            external as string,
            port,
            "/api/export",
            `198.51.100.${i}`,
          ),
        );
      }
      // /api/export allows 3 a minute to an anonymous client.
      expect(fromLoopback).toEqual([200, 200, 200, 200, 200]);
      expect(fromElsewhere).toEqual([200, 200, 200, 429, 429]);
    },
    30_000,
  );
});
