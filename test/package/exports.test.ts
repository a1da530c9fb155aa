import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * The published surface: every entry point of package.json `exports` resolves, from the built
 * `dist/`, by its public name (`npm test` builds first), and carries the names the docs promise.
 */
const ENTRY_POINTS: Record<string, string[]> = {
  edgelimit: [
    "createLimiter",
    "definePolicy",
    "loadPolicy",
    "memoryStore",
    "createRateLimit",
    "EdgelimitError",
  ],
  "edgelimit/redis": ["redisStore", "redisStoreFromUrl", "RedisStore"],
  "edgelimit/dynamodb": ["dynamodbStore", "dynamodbStoreFromUrl", "DynamoDbStore"],
  "edgelimit/lambda-edge": ["createViewerRequestHandler", "createViewerResponseHandler"],
  "edgelimit/cloudflare": ["createCloudflareHandler", "EdgelimitCounter", "checkCloudflarePolicy"],
  "edgelimit/fetch": ["withRateLimit", "honoRateLimit", "refusalResponse"],
  "edgelimit/node": [
    "nodeRateLimit",
    "guardNodeRequest",
    "fastifyRateLimit",
    "prometheusMetrics",
    "NodeMetrics",
  ],
};

describe("package entry points", () => {
  for (const [specifier, names] of Object.entries(ENTRY_POINTS)) {
    it(`${specifier} exports ${names.join(", ")}`, () => {
      // A plain Node process, outside vitest's resolver: what a user's `import` gets.
      const script = `const m = await import(${JSON.stringify(specifier)}); console.log(JSON.stringify(Object.keys(m)));`;
      const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
        encoding: "utf8",
      });
      expect(result.stderr).toBe("");
      const exported = JSON.parse(result.stdout) as string[];
      for (const name of names) expect(exported).toContain(name);
    });
  }

  it("installs the edgelimit command", () => {
    const result = spawnSync(process.execPath, ["dist/cli/main.js", "--version"], {
      encoding: "utf8",
    });
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
