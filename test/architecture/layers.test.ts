/**
 * The layers, as STYLE.md draws them: `core/` is the floor and imports nothing of ours above
 * it, no runtime and no third-party package; `http/` and `policy/` build on the core only;
 * `adapters/` translate runtimes onto `http/`'s guard, with the challenge, lists and metrics
 * beside them, and never load the policy parser (edge bundles take a resolved policy). The
 * check reads every import (static, `export ... from`, and dynamic `import()`) of every file
 * under src/.
 */
import { readdirSync, readFileSync } from "node:fs";
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

/** What each layer may import besides itself. */
const ALLOWED: Record<string, readonly string[]> = {
  core: [],
  http: ["core"],
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
    "package:prom-client",
    "package:node:http",
    "package:node:stream",
    "package:node:zlib",
  ],
  /** Stores build on the core only (and the AWS signer, and their clients' packages). */
  stores: [
    "core",
    "aws",
    "package:ioredis",
    "package:node:http",
    "package:node:https",
    "package:node:net",
  ],
  /** The one way the project draws charts, for reports and the dashboard. */
  charts: ["core", "package:node:fs", "package:node:module"],
  /** What replay and simulate share: the policy rewrite, the reference engine, report pieces. */
  offline: ["core", "stores", "charts"],
  replay: [
    "core",
    "policy",
    "stores",
    "offline",
    "charts",
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
    "package:yaml",
    "package:zod",
    "package:node:fs",
    "package:node:path",
  ],
  /**
   * The rate limit service, a server beside the gateway: it decides through the core and the
   * limiter, reads policies and its own YAML, and shares the gateway's admin listener. It never
   * reaches into stores (the CLI opens them) or other runtimes' adapters beyond node's.
   */
  rls: [
    "core",
    "http",
    "policy",
    "limiter",
    "metrics",
    "challenge",
    "adapters",
    "ops",
    "package:@grpc/grpc-js",
    "package:pino",
    "package:prom-client",
    "package:yaml",
    "package:zod",
    "package:node:crypto",
    "package:node:fs",
    "package:node:http",
    "package:node:net",
    "package:node:path",
  ],
};

/** Single files allowed one more layer, each with its reason. */
const EXCEPTIONS: Record<string, readonly string[]> = {
  // A Lambda@Edge bundle is built for the DynamoDB store: its settings are that store's options.
  "adapters/lambda-edge/bundled.ts": ["stores"],
  // The Cloudflare store lives beside its Worker adapter; its Durable Object calls go through
  // the remote-store kit (a call timeout and a breaker per object) as every remote store's do.
  "adapters/cloudflare/store.ts": ["stores"],
};

function violations(layer: string): string[] {
  const allowed = ALLOWED[layer] ?? [];
  const found: string[] = [];
  for (const file of sourceFiles(join(SRC, layer))) {
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

  it("lets rls/ decide through the core and the limiter, and serve beside the gateway", () => {
    expect(violations("rls")).toEqual([]);
  });

  it("would see a violation: the check reads imports of every kind", () => {
    const file = join(SRC, "core", "example.ts");
    expect(layerOf(file, "../http/respond.js")).toBe("http");
    expect(layerOf(file, "jose")).toBe("package:jose");
    expect(layerOf(file, "node:tls")).toBe("package:node:tls");
    expect(layerOf(file, "./engine.js")).toBe("core");
  });
});
