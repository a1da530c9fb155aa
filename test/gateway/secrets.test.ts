import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { cliEntry } from "../support/cli-entry.js";
import { startedPorts } from "../support/serve-process.js";
import { TEST_SECRET } from "./helpers.js";

/**
 * How `edgelimit serve` treats the challenge secret of the seed policy
 * (`challenge.secret: { env: EDGELIMIT_CHALLENGE_SECRET }`), in a child process whose
 * environment has none of edgelimit's variables, as on a fresh machine.
 */
const dir = mkdtempSync(join(tmpdir(), "edgelimit-secrets-"));
const children: ChildProcess[] = [];

function freshEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!name.startsWith("EDGELIMIT_")) env[name] = value;
  return { ...env, ...extra };
}

async function serve(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(
    process.execPath,
    [
      ...cliEntry(),
      "serve",
      "--host",
      "127.0.0.1",
      // Ports the system picks, read back from the "gateway started" line.
      "--port",
      "0",
      "--admin-port",
      "0",
      ...args,
    ],
    { env, stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  let base = "";
  const started = async (): Promise<void> => {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const ports = startedPorts(output);
      if (ports !== undefined) {
        base = `http://127.0.0.1:${ports.port}`;
        return;
      }
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`the gateway did not start; output:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return {
    /** Known once `started()` resolved. */
    get base() {
      return base;
    },
    output: () => output,
    exited,
    started,
  };
}

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) {
      child.kill("SIGKILL");
      await new Promise((resolve) => child.once("exit", resolve));
    }
  }
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("the challenge secret in the gateway", () => {
  it("npm start's demo runs with no variable set, signing with a demo key of its own", async () => {
    const gateway = await serve(
      ["--demo", "--policy", "examples/policies/cloudfront.yaml"],
      freshEnv(),
    );
    await gateway.started();
    expect(gateway.output()).toMatch(/EDGELIMIT_CHALLENGE_SECRET was not set: .*DEMO ONLY/);
    const page = await fetch(`${gateway.base}/captcha?redirect=%2F`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/name="challenge"/);
    const api = await fetch(`${gateway.base}/api/search?q=shoes`);
    await api.arrayBuffer();
    expect(api.status).toBe(200);
  }, 30_000);

  it("outside the demo, refuses to start without the variable, naming the field and what to set", async () => {
    const gateway = await serve(
      ["--policy", "examples/policies/cloudfront.yaml", "--upstream", "http://127.0.0.1:9"],
      freshEnv({ EDGELIMIT_JWT_SECRET: TEST_SECRET }),
    );
    expect(await gateway.exited).toBe(1);
    expect(gateway.output()).toContain("challenge.secret");
    expect(gateway.output()).toContain("export EDGELIMIT_CHALLENGE_SECRET=");
    expect(gateway.output()).toContain("EL_POLICY_SECRET_MISSING");
  }, 30_000);

  it("with no challenge.secret at all, one process signs with its own key and warns", async () => {
    const policy = join(dir, "unsigned.yaml");
    writeFileSync(
      policy,
      readFileSync("examples/policies/cloudfront.yaml", "utf8").replace(
        "  secret: { env: EDGELIMIT_CHALLENGE_SECRET }\n",
        "",
      ),
    );
    expect(readFileSync(policy, "utf8")).not.toContain("EDGELIMIT_CHALLENGE_SECRET");
    const gateway = await serve(
      ["--policy", policy, "--upstream", "http://127.0.0.1:9"],
      freshEnv({ EDGELIMIT_JWT_SECRET: TEST_SECRET }),
    );
    await gateway.started();
    expect(gateway.output()).toContain(
      '"msg":"challenge.secret is not set: challenges and passes are signed with a random key of this process',
    );
    const page = await fetch(`${gateway.base}/captcha`);
    await page.arrayBuffer();
    expect(page.status).toBe(200);
  }, 30_000);
});
