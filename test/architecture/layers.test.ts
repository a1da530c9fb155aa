/**
 * The layers, as docs/architecture.md draws them: `core/` is the floor and imports nothing of
 * ours above it, no runtime and no third-party package; `http/` and `policy/` build on the core
 * only; `adapters/` translate runtimes onto `http/`'s guard, with the challenge, lists and
 * metrics beside them, and never load the policy parser (edge bundles take a resolved policy);
 * `node-http/` is Node's HTTP plumbing, below everything that serves on Node; `ops/` is the
 * operations plane (admin listener, dashboard, health, snapshots); `gateway/` and `rls/` are
 * the two servers, side by side on it, neither importing the other. The check reads every
 * import (static, `export ... from`, and dynamic `import()`) of every file under src/.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve("src");

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** Every module a file names in an import, an `export ... from` or an `import()`. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']/gms,
    /^\s*import\s+["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const pattern of patterns) {
    for (const match of text.matchAll(pattern)) found.push(match[1] as string);
  }
  return found;
}

/** The top folder under src/ a relative import lands in (`core`, `http`, ...), or the package. */
function layerOf(file: string, specifier: string): string {
  if (!specifier.startsWith(".")) return `package:${specifier}`;
  const target = relative(SRC, resolve(dirname(file), specifier));
  return target.includes("/") ? (target.split("/")[0] as string) : target.replace(/\.js$/, "");
}

/** What each layer may import besides itself: every folder and file under src/ but the CLI. */
const ALLOWED: Record<string, readonly string[]> = {
  core: [],
  /** The rate-limited warnings the stores' and servers' messages share. */
  warnings: [],
  /** Text made safe in HTML, for the challenge page and the reports. */
  html: [],
  /** AWS request signing, for the DynamoDB store and the list sources. */
  aws: ["package:node:crypto"],
  http: ["core"],
  /** The JWT verifier behind the core's `TokenVerifier`. */
  tokens: ["core", "package:jose", "package:jose/jwt/verify", "package:jose/key/import"],
  policy: ["core", "package:yaml", "package:zod", "package:node:fs"],
  adapters: [
    "core",
    "http",
    "challenge",
    "lists",
    "metrics",
    // The engine joined to its HTTP answers (createLimiter), and the rate-limited warnings.
    "limiter",
    "warnings",
    // Node's request and response as Web ones, for the Node middleware's challenge page.
    "node-http",
    "package:prom-client",
    "package:node:http",
    "package:node:stream",
    "package:node:zlib",
  ],
  /** Node's HTTP plumbing (Web conversion, listen, drain-and-close): nothing of ours. */
  "node-http": ["package:node:http", "package:node:stream"],
  /** Stores build on the core only (and the AWS signer, and their clients' packages). */
  stores: [
    "core",
    "aws",
    "package:ioredis",
    "package:node:http",
    "package:node:https",
    "package:node:net",
  ],
  /** `createLimiter`: the engine joined to its HTTP answers and the JWT verifier. */
  limiter: ["core", "http", "tokens", "warnings"],
  /** Decisions as Prometheus metrics, for the Node middleware and both servers. */
  metrics: ["http", "policy", "package:prom-client"],
  challenge: ["core", "policy", "html"],
  /** Allow and deny lists, refreshed from files, URLs and S3 (signed with aws/). */
  lists: [
    "core",
    "aws",
    "limiter",
    "policy",
    "package:node:fs",
    "package:node:fs/promises",
    "package:node:path",
  ],
  /** The package's main entry (`edgelimit`). */
  index: ["core", "http", "limiter", "policy", "stores"],
  /** The one way the project draws charts, for reports and the dashboard. */
  charts: ["core", "package:node:fs", "package:node:module"],
  /** What replay and simulate share: the policy rewrite, the reference engine, report pieces. */
  offline: ["core", "stores", "charts", "html", "package:yaml", "package:node:fs"],
  replay: [
    "core",
    "policy",
    "stores",
    "offline",
    "charts",
    "html",
    "package:node:fs",
    "package:node:path",
    "package:node:stream",
    "package:node:string_decoder",
    "package:node:zlib",
  ],
  simulate: [
    "core",
    "policy",
    "stores",
    "offline",
    "charts",
    "html",
    "package:yaml",
    "package:zod",
    "package:node:fs",
    "package:node:path",
  ],
  /**
   * The operations plane both servers serve: the admin listener, the dashboard, health,
   * snapshots and what they show. It reads the core's and the guard's types, the lists' figures
   * and the charts; it never imports a server.
   */
  ops: [
    "core",
    "http",
    "lists",
    "charts",
    "warnings",
    "node-http",
    "package:pino",
    "package:node:fs/promises",
    "package:node:http",
    "package:node:module",
  ],
  /**
   * `edgelimit serve`: the Node guard in front of a reverse proxy, on the operations plane. It
   * never imports rls, nor the stores (the CLI opens them).
   */
  gateway: [
    "core",
    "http",
    "policy",
    "limiter",
    "metrics",
    "lists",
    "adapters",
    "node-http",
    "ops",
    "package:jose",
    "package:pino",
    "package:prom-client",
    "package:undici",
    "package:node:crypto",
    "package:node:http",
    "package:node:net",
  ],
  /**
   * The rate limit service, a server beside the gateway: it decides through the core and the
   * limiter, reads policies and its own YAML, and serves the operations plane. It never
   * imports the gateway, the adapters or the stores (the CLI opens them).
   */
  rls: [
    "core",
    "http",
    "policy",
    "limiter",
    "metrics",
    "node-http",
    "ops",
    "package:pino",
    "package:prom-client",
    "package:yaml",
    "package:zod",
    "package:node:crypto",
    "package:node:fs",
    "package:node:http",
    "package:node:http2",
    "package:node:net",
    "package:node:path",
    "package:node:zlib",
  ],
};

/** Single files allowed one more layer, each with its reason. */
const EXCEPTIONS: Record<string, readonly string[]> = {
  // A Lambda@Edge bundle is built for the DynamoDB store: its settings are that store's options.
  "adapters/lambda-edge/bundled.ts": ["stores"],
  // Its overrides are that store's too: the items `edgelimit override --store dynamodb://` writes.
  "adapters/lambda-edge/overrides.ts": ["stores"],
  // The Cloudflare store lives beside its Worker adapter; its Durable Object calls go through
  // the remote-store kit (a call timeout and a breaker per object) as every remote store's do.
  "adapters/cloudflare/store.ts": ["stores"],
  // The overrides object keeps them as every store does: the same field per subject and scope,
  // the same log entry, the same EL_OVERRIDE_FULL (stores/memory-overrides.ts).
  "adapters/cloudflare/override-object.ts": ["stores"],
};

/** The CLI is the top floor: it may import every layer, so it has no row. */
const TOP = "cli";

/** A layer's files: a folder's, or the one file a top-level layer is (`limiter.ts`). */
function filesOf(layer: string): string[] {
  const folder = join(SRC, layer);
  return existsSync(folder) ? sourceFiles(folder) : [`${folder}.ts`];
}

function violations(layer: string): string[] {
  const allowed = ALLOWED[layer] ?? [];
  const found: string[] = [];
  for (const file of filesOf(layer)) {
    const excepted = EXCEPTIONS[relative(SRC, file)] ?? [];
    for (const specifier of importsOf(file)) {
      const target = layerOf(file, specifier);
      if (target !== layer && !allowed.includes(target) && !excepted.includes(target)) {
        found.push(`${relative(SRC, file)} imports ${specifier}`);
      }
    }
  }
  return found;
}

/** Every import of a file under `from/` that lands in `to/`, whatever ALLOWED says. */
function importsInto(from: string, to: string): string[] {
  return filesOf(from).flatMap((file) =>
    importsOf(file)
      .filter((specifier) => layerOf(file, specifier) === to)
      .map((specifier) => `${relative(SRC, file)} imports ${specifier}`),
  );
}

describe("the layers", () => {
  it("keeps core/ free of http/, policy/, runtimes and third-party packages", () => {
    expect(violations("core")).toEqual([]);
  });

  it("lets http/ build on core/ only", () => {
    expect(violations("http")).toEqual([]);
  });

  it("lets policy/ build on core/ (and its parsers) only", () => {
    expect(violations("policy")).toEqual([]);
  });

  it("lets adapters/ translate runtimes onto http/ and the challenge, lists and metrics", () => {
    expect(violations("adapters")).toEqual([]);
  });

  it("lets stores/ build on core/ only (and the AWS signer)", () => {
    expect(violations("stores")).toEqual([]);
  });

  it("keeps the offline tools (replay, simulate, their toolkit, the charts) off the runtimes", () => {
    for (const layer of ["charts", "offline", "replay", "simulate"]) {
      expect(violations(layer)).toEqual([]);
    }
  });

  it("keeps node-http/ free of everything of ours", () => {
    expect(violations("node-http")).toEqual([]);
  });

  it("lets ops/ serve the operations plane without importing either server", () => {
    expect(violations("ops")).toEqual([]);
  });

  it("lets gateway/ and rls/ stand side by side on ops/, neither importing the other", () => {
    expect(violations("gateway")).toEqual([]);
    expect(violations("rls")).toEqual([]);
    expect(importsInto("gateway", "rls")).toEqual([]);
    expect(importsInto("rls", "gateway")).toEqual([]);
  });

  it("keeps the floors under the servers to their rows", () => {
    for (const layer of ["warnings", "aws", "tokens", "limiter", "metrics", "challenge", "lists"]) {
      expect(violations(layer)).toEqual([]);
    }
    expect(violations("index")).toEqual([]);
  });

  it("has a row for every folder and file under src/ but the CLI", () => {
    const layers = readdirSync(SRC).map((name) => name.replace(/\.ts$/, ""));
    expect(layers.filter((layer) => layer !== TOP && ALLOWED[layer] === undefined)).toEqual([]);
  });

  it("would see a violation: the check reads imports of every kind", () => {
    const file = join(SRC, "core", "example.ts");
    expect(layerOf(file, "../http/respond.js")).toBe("http");
    expect(layerOf(file, "jose")).toBe("package:jose");
    expect(layerOf(file, "node:tls")).toBe("package:node:tls");
    expect(layerOf(file, "./engine.js")).toBe("core");
  });
});
