import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withinOneWindow } from "../support/windows.js";
import { grpcJsClient, type RlsClient, type RlsProcess, startRls } from "./harness.js";

/**
 * Reloads as Kubernetes makes them: the configuration is a ConfigMap volume, whose files are
 * links through `..data` to a timestamped directory that the kubelet swaps in one rename. The
 * new limits apply, the counters stay; a configuration that does not load changes nothing.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-reload-"));
const volume = join(dir, "config");
let version = 0;

/** Writes a new version of the volume and swaps `..data` to it, as the kubelet does. */
function publish(config: string): void {
  const name = `..2025_01_01_00_00_0${version++}`;
  mkdirSync(join(volume, name));
  writeFileSync(join(volume, name, "config.yaml"), config);
  symlinkSync(name, join(volume, "..data_tmp"));
  renameSync(join(volume, "..data_tmp"), join(volume, "..data"));
}

const limit = (requests: number) =>
  `domain: reload\ndescriptors:\n  - key: client\n    rate_limit: { unit: hour, requests_per_unit: ${requests} }\n`;

let rls: RlsProcess;
let client: RlsClient;
/** Another process given the volume's file (a link through `..data`) rather than its directory. */
let byFile: RlsProcess;
let byFileClient: RlsClient;

beforeAll(async () => {
  mkdirSync(volume);
  publish(limit(5));
  symlinkSync("..data/config.yaml", join(volume, "config.yaml"));
  [rls, byFile] = await Promise.all([
    startRls(["--config", volume]),
    startRls(["--config", join(volume, "config.yaml")]),
  ]);
  client = grpcJsClient(rls.grpcPort);
  byFileClient = grpcJsClient(byFile.grpcPort);
});

afterAll(async () => {
  client?.close();
  byFileClient?.close();
  await Promise.all([rls?.stop(), byFile?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

async function remaining(through = client): Promise<number | undefined> {
  const result = await through.shouldRateLimit({
    domain: "reload",
    descriptors: [{ entries: [{ key: "client", value: "c1" }] }],
  });
  return result.statuses?.[0]?.limit_remaining;
}

async function logged(message: string, count: number, process = rls): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (process.logLines().filter((line) => line.msg === message).length < count) {
    if (Date.now() > deadline) throw new Error(`no "${message}" logged:\n${process.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("a ConfigMap volume that changes", () => {
  it("applies the new limits and keeps the counters", async () => {
    await withinOneWindow(3_600_000, 30_000);
    expect(await remaining()).toBe(4);
    expect(await remaining()).toBe(3);
    expect(await remaining(byFileClient)).toBe(4);
    publish(limit(10));
    await logged("configuration reloaded; counters kept", 1);
    await logged("configuration reloaded; counters kept", 1, byFile);
    // Two counted before, this one the third, under a limit of 10 now.
    expect(await remaining()).toBe(7);
    expect(await remaining(byFileClient)).toBe(8);
  });

  it("keeps the running configuration when the new one does not load", async () => {
    publish(
      "domain: reload\ndescriptors:\n  - key: client\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
    );
    await logged("configuration reload refused; the running configuration stays", 1);
    const refused = rls
      .logLines()
      .find((line) => line.msg === "configuration reload refused; the running configuration stays");
    expect(JSON.stringify(refused?.error)).toContain(
      "line 4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'",
    );
    expect(await remaining()).toBe(6);
    const metrics = await (await fetch(`${rls.adminUrl}metrics`)).text();
    expect(metrics).toContain('edgelimit_rls_reloads_total{source="config",result="refused"} 1');
    expect(metrics).toContain('edgelimit_rls_reloads_total{source="config",result="applied"} 1');
  });
});
