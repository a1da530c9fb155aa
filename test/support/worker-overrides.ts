/**
 * The cases every store an edge Worker counts in must pass for operators' overrides (Redis over
 * HTTP and DynamoDB over fetch in workerd): the rig says how to reach that test's isolate, its
 * store's operator and the CLI against it.
 */
import { execFile } from "node:child_process";
import { expect, it } from "vitest";
import type { Limiter } from "../../src/limiter.js";
import { cliEntry } from "./cli-entry.js";
import { within } from "./within.js";

/**
 * `edgelimit override …` in a child process against `store` with `policyFile`, asynchronously
 * (the store's server may answer from the test's own process); `env` adds to the environment.
 */
export function overrideCli(
  store: string,
  policyFile: string,
  env: Readonly<Record<string, string>> = {},
): WorkerOverrideRig["cli"] {
  return (args) =>
    new Promise((done) => {
      execFile(
        process.execPath,
        [...cliEntry(), "override", ...args, "--store", store, "--policy", policyFile],
        { encoding: "utf8", env: { ...process.env, ...env } },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
          done({ code, stdout, stderr });
        },
      );
    });
}

export interface WorkerOverrideRig {
  /** A limiter on the same store, outside the Worker: the operator's library admin. */
  readonly operator: () => Limiter;
  /** Makes the isolate (fresh at its first use). */
  readonly isolate: () => Promise<unknown>;
  /** One request from `ip` to the Worker: its status and `X-RateLimit-Limit`. */
  readonly send: (ip: string) => Promise<{ status: number; limit: string | null }>;
  /** `edgelimit override …` against the store. */
  readonly cli: (args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;
  /** How long a change made elsewhere may take to apply in the Worker. */
  readonly boundMs: number;
}

/** The cases, inside the caller's `describe` (plan: 3 requests an hour per address). */
export function workerOverrideCases(rig: WorkerOverrideRig): void {
  const { send, boundMs } = rig;
  it("concurrent first requests of a fresh isolate wait for its first read, and a block set before it started refuses them", async () => {
    await rig
      .operator()
      .overrides.set({ subject: "ip:198.51.100.10", block: "leaked", note: "ops" });
    await rig.isolate();
    const answers = await Promise.all(
      ["198.51.100.10", "198.51.100.11", "198.51.100.10", "198.51.100.12", "198.51.100.10"].map(
        send,
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual([403, 200, 403, 200, 403]);
  });

  it("a limit set with the CLI applies within the bound, a block set with the library refuses, and their removal restores the plan's limit", async () => {
    const ip = "198.51.100.20";
    for (let i = 0; i < 3; i++) expect(await send(ip)).toEqual({ status: 200, limit: "3" });
    expect((await send(ip)).status).toBe(429);

    const set = await rig.cli(["set", `ip:${ip}`, "--limit", "100", "--note", "contract 42"]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    await within(
      async () => (await send(ip)).status === 200,
      "the raised limit in the Worker",
      boundMs,
      50,
    );
    expect(await send(ip)).toEqual({ status: 200, limit: "100" });

    const other = "198.51.100.21";
    expect((await send(other)).status).toBe(200);
    const operator = rig.operator();
    await operator.overrides.set({ subject: `ip:${other}`, block: "abuse", note: "ops" });
    await within(
      async () => (await send(other)).status === 403,
      "the block in the Worker",
      boundMs,
      50,
    );

    await operator.overrides.remove({ subject: `ip:${ip}` });
    await operator.overrides.remove({ subject: `ip:${other}` });
    // The plan's limit again, with the counts as they were (each poll before the block counted).
    await within(
      async () => (await send(ip)).status === 429,
      "the raise's removal in the Worker",
      boundMs,
      50,
    );
    expect(await send(ip)).toEqual({ status: 429, limit: "3" });
    expect((await send(other)).limit).toBe("3");
  });
}
