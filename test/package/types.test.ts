import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { install, pack, ROOT } from "./packed.js";

/**
 * The types the package ships, as a TypeScript user compiles against them: the packed tarball
 * installed into fresh projects, files compiled by tsc. Each `@ts-expect-error` marks a mistake
 * that must not compile (a misspelt rule field, a duration that is not one): were it to
 * compile, the directive itself would be the error. Express's `req.rateLimit` compiles in an
 * Express app, and `edgelimit/node` compiles in a project without @types/express.
 */

const TSC = join(ROOT, "node_modules", ".bin", "tsc");
/** TypeScript 5, as most projects still compile with (see matrix.test.ts). */
const TSC5 = join(ROOT, "node_modules", "typescript5", "bin", "tsc");
/** tsc takes 10-15 s alone here, and several times that under load. */
const TYPECHECK_TIMEOUT_MS = 120_000;

let work: string;
let tarball: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "edgelimit-types-"));
  tarball = pack(work).tarball;
}, 60_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** A project with the package and `extra` installed, and `files` in it. */
function project(name: string, extra: string[], files: Record<string, string>): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  install(tarball, dir, extra);
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name, version: "1.0.0", type: "module" }, null, 2)}\n`,
  );
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        strict: true,
        noEmit: true,
        types: ["node"],
      },
      files: Object.keys(files),
    }),
  );
  return dir;
}

function typecheck(dir: string, tsc = TSC): string {
  const result = spawnSync(tsc, ["-p", join(dir, "tsconfig.json")], {
    cwd: dir,
    encoding: "utf8",
  });
  return `${result.stdout}${result.stderr}${result.status === 0 ? "" : `exit ${result.status}`}`;
}

/** Policies as they are written in TypeScript: what compiles, and what must not. */
const POLICIES = `import { definePolicy, type WindowDuration } from "edgelimit";

const seconds = 30;
const window: WindowDuration = "1h";

export const written = [
  definePolicy({
    budget: 50,
    connectBudget: "2s",
    unavailableRetryAfter: "30s",
    challenge: { passTtl: "1h", challengeTtl: "500ms" },
    tiers: {
      anonymous: {
        global: 100,
        paths: { "/api/export": { limit: 3, window: "1m" }, "/api/reports": 10 },
      },
      authenticated: {
        global: { limit: 10000, window: "1mo", algorithm: "fixed-window" },
        plans: { pro: { limit: 100, window: \`\${seconds}s\` } },
      },
    },
    namespaces: { login: { match: { path: "/login" }, limit: 5, window } },
  }),

  definePolicy({
    tiers: {
      anonymous: {
        // @ts-expect-error: \`limt\` is not a field of a rule
        global: { limt: 5 },
      },
    },
  }),
  definePolicy({
    tiers: {
      anonymous: {
        // @ts-expect-error: \`limt\` in a path's rule
        paths: { "/api/export": { limt: 3 } },
      },
    },
  }),
  definePolicy({
    tiers: {
      // @ts-expect-error: a tier is anonymous or authenticated
      anonymus: { global: 5 },
    },
  }),
  definePolicy({
    tiers: {
      anonymous: {
        // @ts-expect-error: a duration is a number and a unit written together ("60s")
        global: { limit: 5, window: "60 seconds" },
      },
    },
  }),
  definePolicy({
    tiers: {
      anonymous: {
        // @ts-expect-error: a bare number is no window (60 seconds, or 60 ms?)
        global: { limit: 5, window: 60 },
      },
    },
  }),
  definePolicy({
    tiers: {
      anonymous: {
        // @ts-expect-error: a unit is lowercase ("1m" a minute, "1mo" a month)
        global: { limit: 5, window: "1M" },
      },
    },
  }),
  definePolicy({
    // @ts-expect-error: only a window can be in calendar months
    challenge: { passTtl: "1mo" },
  }),
  definePolicy({
    // @ts-expect-error: a bare number is milliseconds for budget only
    connectBudget: 2000,
  }),
];
`;

/** An Express app reading the verdict the middleware leaves on the request. */
const EXPRESS_APP = `import express from "express";
import { createLimiter, definePolicy, memoryStore } from "edgelimit";
import { nodeRateLimit } from "edgelimit/node";

const limiter = createLimiter({
  policy: definePolicy({ tiers: { anonymous: { global: 100 } } }),
  store: memoryStore(),
});
const app = express();
app.use(nodeRateLimit({ limiter }));
app.get("/", (req, res) => {
  const remaining: number | undefined = req.rateLimit?.remaining;
  res.json({ remaining, rule: req.rateLimit?.rule });
});
app.get("/typo", (req, res) => {
  // @ts-expect-error: the verdict is typed, its fields too
  res.json({ remaining: req.rateLimit?.remainig });
});
export { app };
`;

/** node:http alone: the package's Express augmentation needs no Express. */
const NODE_HTTP = `import { createServer } from "node:http";
import { createLimiter, definePolicy, memoryStore } from "edgelimit";
import { nodeRateLimit, type RateLimitedRequest } from "edgelimit/node";

const guard = nodeRateLimit({
  limiter: createLimiter({
    policy: definePolicy({ tiers: { anonymous: { global: 100 } } }),
    store: memoryStore(),
  }),
});
export const server = createServer((req, res) =>
  guard(req, res, () => res.end(String((req as RateLimitedRequest).rateLimit?.remaining))),
);
`;

describe("the types the package ships, compiled by tsc", () => {
  let typed: string;
  beforeAll(() => {
    typed = project("typed", ["@types/node", "@types/express", "express"], {
      "policies.ts": POLICIES,
      "app.ts": EXPRESS_APP,
    });
  }, 60_000);

  it(
    "TypeScript 7: policies are typed as the schema says, and req.rateLimit compiles in Express",
    () => {
      expect(typecheck(typed)).toBe("");
    },
    TYPECHECK_TIMEOUT_MS,
  );

  it(
    "TypeScript 5: the same",
    () => {
      expect(typecheck(typed, TSC5)).toBe("");
    },
    TYPECHECK_TIMEOUT_MS,
  );

  it(
    "a project without @types/express compiles edgelimit/node",
    () => {
      const plain = project("plain", ["@types/node"], { "server.ts": NODE_HTTP });
      expect(typecheck(plain)).toBe("");
    },
    TYPECHECK_TIMEOUT_MS,
  );
});
