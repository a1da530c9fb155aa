import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { Plugin } from "esbuild";
import { distantReplicaWarnings } from "../adapters/lambda-edge/regions.js";
import { zipFiles } from "../adapters/lambda-edge/zip.js";
import { challenges, requireSharedChallengeSecret } from "../challenge/shared-secret.js";
import { EdgelimitError } from "../core/errors.js";
import { checkOptions } from "../core/options.js";
import { loadPolicy } from "../policy/load.js";
import type { ResolvedPolicy, SecretSource } from "../policy/types.js";
import { dynamodbStoreShape } from "../stores/dynamodb/store.js";
import { type DynamoDbStoreOptions, parseDynamodbUrl } from "../stores/dynamodb.js";
import { type BuildOverridesOption, overridesSettings } from "./build-overrides.js";
import { parsedOrExit, writeEdgelimitError } from "./errors.js";
import { BUILD_USAGE } from "./usage.js";

export interface LambdaEdgeBuildOptions {
  readonly policy: ResolvedPolicy;
  readonly store: DynamoDbStoreOptions;
  readonly outDir: string;
  /** Secrets named `{ env: NAME }` in the policy are read from here at build time. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly minify?: boolean;
  /**
   * Whether the viewer-request function reads operators' overrides from the table (docs/
   * overrides.md, "Lambda@Edge"), and how often (`refreshMs`, default 5 s) and how long a new
   * instance's first requests wait for the first read (`firstWaitMs`, default the policy's
   * budget plus two round trips to the replica). Default: on when the policy has an
   * `overrides:` section, off otherwise.
   */
  readonly overrides?: BuildOverridesOption;
}

export interface BuiltFunction {
  readonly name: "viewer-request" | "viewer-response";
  /** The bundled entry (`index.js`, the handler `index.handler`) and the deployable zip. */
  readonly script: string;
  readonly zip: string;
  /**
   * What every cold start loads: `index.js`. Code needed only sometimes (the challenge page,
   * jose for a token) is in files of its own, required on first use.
   */
  readonly minifiedBytes: number;
  /** Every file in the zip, the lazily loaded chunks included. */
  readonly totalBytes: number;
  readonly zippedBytes: number;
  /** The file names in the zip, the entry first. */
  readonly files: readonly string[];
  /** Whether it reads operators' overrides (its role then needs `BatchGetItem` too). */
  readonly overrides: boolean;
}

function parseBuildArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      policy: { type: "string" },
      store: { type: "string" },
      out: { type: "string" },
      "no-minify": { type: "boolean", default: false },
      overrides: { type: "boolean" },
      "no-overrides": { type: "boolean" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
}

/** `edgelimit build lambda-edge ...`: bundles the policy and store settings into two zips. */
export async function run(argv: string[]): Promise<number> {
  const parsed = parsedOrExit("build", BUILD_USAGE, () => parseBuildArgs(argv));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  if (
    positionals[0] !== "lambda-edge" ||
    values.policy === undefined ||
    values.store === undefined ||
    values.out === undefined
  ) {
    process.stderr.write(BUILD_USAGE);
    return 2;
  }
  try {
    if (values.overrides && values["no-overrides"]) {
      process.stderr.write("edgelimit build: --overrides and --no-overrides: give one\n");
      return 2;
    }
    const policy = loadPolicy(values.policy);
    const store = parseDynamodbUrl(values.store);
    for (const warning of edgeWarnings(policy, store))
      process.stderr.write(`edgelimit build: warning: ${warning}\n`);
    const built = await buildLambdaEdge({
      policy,
      store,
      outDir: values.out,
      minify: !values["no-minify"],
      ...(values.overrides ? { overrides: true } : {}),
      ...(values["no-overrides"] ? { overrides: false } : {}),
    });
    for (const fn of built) {
      process.stdout.write(
        `${fn.name}: ${fn.zip} (${fn.minifiedBytes} bytes minified loaded at cold start, ${fn.totalBytes} in ${fn.files.length} files, ${fn.zippedBytes} bytes zipped${fn.overrides ? "; reads overrides" : ""})\n`,
      );
    }
    return 0;
  } catch (error) {
    if (writeEdgelimitError("build", error)) return 1;
    throw error;
  }
}

/**
 * Lambda@Edge has no environment variables, so everything a function needs is bundled: the
 * resolved policy as JSON (never the YAML/zod loader), its secrets read now from `env`, and the
 * store settings. Each function is one esbuild bundle in its own zip.
 */
export async function buildLambdaEdge(options: LambdaEdgeBuildOptions): Promise<BuiltFunction[]> {
  // The CLI and the CDK app (infra/app.ts) both build through here, so both refuse this.
  requireSharedChallengeSecret(options.policy, "Lambda@Edge runs many instances of the function");
  // Checked here, once: the bundle's own checks are left out of it (see `define` below).
  checkOptions("buildLambdaEdge: store", options.store, dynamodbStoreShape(), {
    code: "EL_STORE_OPTION",
  });
  const policy = bakeSecrets(options.policy, options.env ?? process.env);
  const sources = sourceLayout();
  const outDir = resolve(options.outDir);
  mkdirSync(outDir, { recursive: true });
  const usesLists = (policy.lists ?? []).length > 0;
  const challenging = challenges(policy);
  const hybrid = policy.rules.some((rule) => rule.counting === "hybrid");
  const overrides = overridesSettings(options, policy);
  const entries: Record<BuiltFunction["name"], string> = {
    "viewer-request": [
      `import { createViewerRequestHandler } from ${JSON.stringify(sources.adapter("viewer-request"))};`,
      `import { bundledStoreOptions, lazyChallenge } from ${JSON.stringify(sources.adapter("bundled"))};`,
      `import { DynamoDbStore } from ${JSON.stringify(sources.store)};`,
      usesLists ? `import { edgeLists } from ${JSON.stringify(sources.adapter("lists"))};` : "",
      `const policy = JSON.parse(${JSON.stringify(JSON.stringify(policy))});`,
      hybrid ? `import { hybridCounting } from ${JSON.stringify(sources.hybrid)};` : "",
      `const counted = new DynamoDbStore(bundledStoreOptions(${JSON.stringify(options.store)}, process.env.AWS_REGION));`,
      // Hybrid counting only where the policy has hybrid rules: a bundle without them leaves it out.
      hybrid ? "const store = hybridCounting(counted);" : "const store = counted;",
      // The TCP and TLS handshakes happen while the module initialises, not in the first request.
      "counted.preconnect();",
      usesLists ? "const lists = edgeLists(policy);" : "",
      // The challenge is a file of its own: loaded by the first request that needs it.
      challenging
        ? `const challenge = lazyChallenge(policy, () => import(${JSON.stringify(sources.challenge)}).then((module) => module.createChallenge(policy, { env: {} })));`
        : "",
      // Overrides are a file of their own, required at init only when on: the first read
      // starts as the handler is made, so a cold start's init overlaps it.
      overrides === undefined
        ? ""
        : `import { edgeOverrides } from ${JSON.stringify(OVERRIDES_FILE)};\nconst overrides = edgeOverrides(counted, { policy, ...${JSON.stringify(overrides)} });`,
      `export const handler = createViewerRequestHandler({ policy, store, env: {}${usesLists ? ", allowlists: lists.allow, denylists: lists.deny" : ""}${challenging ? ", challenge" : ""}${overrides === undefined ? "" : ", overrides"} });`,
    ].join("\n"),
    "viewer-response": [
      `import { createViewerResponseHandler } from ${JSON.stringify(sources.adapter("viewer-response"))};`,
      "export const handler = createViewerResponseHandler();",
    ].join("\n"),
  };
  const esbuild = await loadEsbuild();
  // Code a request needs only sometimes is a file of its own, required on first use: the
  // challenge (page, proof of work, pass signing), jose (only a request with a token) and
  // `limiter.peek` (which no Lambda@Edge handler calls: the file is there for a custom one).
  const lazyFiles: Record<string, string> = {
    [sources.challenge]: "./challenge.js",
    [sources.jose]: "./jose.js",
    [sources.peek]: "./peek.js",
  };
  const bundle = async (entry: string) => {
    const result = await esbuild.build({
      entryPoints: [entry],
      plugins: [entryPlugin(entries, sources.root), lazyFilePlugin(lazyFiles, entry)],
      bundle: true,
      // CommonJS, not ESM with splitting: a fresh Node 20 process pays about 10 ms to start its
      // ES module loader, more than the split saves (docs/aws.md). `import()` of a lazy file
      // becomes a `require` of it.
      format: "cjs",
      supported: { "dynamic-import": false },
      platform: "node",
      target: "node20",
      minify: options.minify ?? true,
      legalComments: "none",
      // Every option in the bundle is written here, from the checked policy and store settings:
      // the run-time checks for hand-written JavaScript are dead code in it (core/bundle.d.ts).
      define: {
        EDGELIMIT_BUNDLE: "true",
        // Region allowances only in a bundle whose store has them (region-allowance.ts).
        ...(options.store.regionAllowance === true ? {} : { EDGELIMIT_REGION_ALLOWANCES: "false" }),
      },
      write: false,
      logLevel: "silent",
    });
    return result.outputFiles[0]?.contents ?? new Uint8Array();
  };
  const built: BuiltFunction[] = [];
  for (const name of ["viewer-request", "viewer-response"] as const) {
    const outputs = [{ name: "index.js", data: await bundle(`${ENTRY_PREFIX}${name}`) }];
    if (name === "viewer-request") {
      for (const [source, file] of Object.entries(lazyFiles)) {
        if (source === sources.challenge && !challenging) continue;
        outputs.push({ name: file.slice(2), data: await bundle(source) });
      }
      if (overrides !== undefined) {
        outputs.push({
          name: OVERRIDES_FILE.slice(2),
          data: await bundle(sources.adapter("overrides")),
        });
      }
    }
    const dir = join(outDir, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const file of outputs) writeFileSync(join(dir, file.name), file.data);
    const zipped = zipFiles(outputs);
    const zip = join(outDir, `${name}.zip`);
    writeFileSync(zip, zipped);
    built.push({
      name,
      script: join(dir, "index.js"),
      zip,
      minifiedBytes: (outputs[0] as (typeof outputs)[number]).data.length,
      totalBytes: outputs.reduce((sum, file) => sum + file.data.length, 0),
      zippedBytes: zipped.length,
      files: outputs.map((file) => file.name),
      overrides: name === "viewer-request" && overrides !== undefined,
    });
  }
  writeFileSync(
    join(outDir, "manifest.json"),
    `${JSON.stringify({ store: { ...options.store, credentials: undefined }, functions: built.map(({ name, minifiedBytes, totalBytes, zippedBytes, files, overrides: reads }) => ({ name, file: `${name}.zip`, handler: "index.handler", minifiedBytes, totalBytes, zippedBytes, files, overrides: reads })) }, null, 2)}\n`,
  );
  return built;
}

const ENTRY_PREFIX = "edgelimit-entry:";
/** The viewer-request's overrides (adapters/lambda-edge/overrides.ts), next to `index.js`. */
const OVERRIDES_FILE = "./overrides.js";

/** Serves the generated entry modules to esbuild, resolved from the source root. */
function entryPlugin(entries: Record<string, string>, root: string): Plugin {
  return {
    name: "edgelimit-entries",
    setup(build) {
      build.onResolve({ filter: /^edgelimit-entry:/ }, (args) => ({
        path: args.path.slice(ENTRY_PREFIX.length),
        namespace: "edgelimit-entry",
      }));
      // Required from the entry, not bundled into it: a file of its own in the zip.
      build.onResolve({ filter: /^\.\/overrides\.js$/, namespace: "edgelimit-entry" }, () => ({
        path: OVERRIDES_FILE,
        external: true,
      }));
      build.onLoad({ filter: /.*/, namespace: "edgelimit-entry" }, (args) => ({
        contents: entries[args.path],
        resolveDir: root,
        loader: "js",
      }));
    },
  };
}

/**
 * Leaves the lazily loaded sources out of every bundle but their own: a dynamic import of one
 * becomes a `require` of its file, next to `index.js` in the zip.
 */
function lazyFilePlugin(files: Record<string, string>, ownEntry: string): Plugin {
  return {
    name: "edgelimit-lazy-files",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind !== "dynamic-import") return undefined;
        const target = resolve(args.resolveDir, args.path.replace(/\.js$/, ".ts"));
        const candidates = [target, resolve(args.resolveDir, args.path)];
        for (const candidate of candidates) {
          const file = files[candidate];
          if (file !== undefined && candidate !== ownEntry) return { path: file, external: true };
        }
        return undefined;
      });
    },
  };
}

/** Replaces `{ env: NAME }` and `{ file: PATH }` secrets with their values, read now. */
export function bakeSecrets(
  policy: ResolvedPolicy,
  env: Readonly<Record<string, string | undefined>>,
): ResolvedPolicy {
  const bake = (source: SecretSource | undefined, field: string): SecretSource | undefined => {
    if (source === undefined || "value" in source) return source;
    if ("env" in source) {
      const value = env[source.env];
      if (value === undefined || value === "") {
        throw new EdgelimitError(
          "EL_POLICY_SECRET_MISSING",
          `${field}: Lambda@Edge has no environment variables, so ${source.env} is read at build time; set it (export ${source.env}=...) and build again`,
        );
      }
      return { value };
    }
    return { value: readFileSync(source.file, "utf8") };
  };
  const jwt = policy.identity.jwt;
  const challenge = policy.challenge;
  const provider = challenge.provider;
  return {
    ...policy,
    identity: {
      ...policy.identity,
      jwt:
        jwt === undefined
          ? undefined
          : {
              ...jwt,
              secret: bake(jwt.secret, "identity.user.jwt.secret"),
              publicKey: bake(jwt.publicKey, "identity.user.jwt.publicKey"),
            },
    },
    challenge: {
      ...challenge,
      secret: bake(challenge.secret, "challenge.secret"),
      previousSecret: bake(challenge.previousSecret, "challenge.previousSecret"),
      provider:
        provider.kind === "pow"
          ? provider
          : {
              ...provider,
              secret: bake(provider.secret, "challenge.provider.secret") as SecretSource,
            },
    },
  };
}

/**
 * What does not stop a build but costs something at the edge: each Lambda@Edge region whose
 * nearest replica is farther than the policy's budget. The CDK stack warns with the same
 * function (`distantReplicaWarnings`). A challenging policy without `challenge.secret` is not a
 * warning: `buildLambdaEdge` refuses it.
 */
export function edgeWarnings(policy: ResolvedPolicy, store: DynamoDbStoreOptions): string[] {
  return distantReplicaWarnings(store.globalRegions ?? [store.region], policy.budgetMs);
}

/** Where the adapter sources are: `src/**.ts` under tsx, `dist/**.js` once compiled. */
function sourceLayout(): {
  root: string;
  store: string;
  hybrid: string;
  challenge: string;
  jose: string;
  peek: string;
  adapter: (name: string) => string;
} {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = resolve(here, "..");
  const extension = existsSync(join(root, "stores", "dynamodb.ts")) ? ".ts" : ".js";
  return {
    root,
    store: join(root, "stores", `dynamodb${extension}`),
    hybrid: join(root, "core", `hybrid-counting${extension}`),
    challenge: join(root, "challenge", `index${extension}`),
    jose: join(root, "tokens", `jose${extension}`),
    peek: join(root, "core", `peek${extension}`),
    adapter: (name) => join(root, "adapters", "lambda-edge", `${name}${extension}`),
  };
}

async function loadEsbuild(): Promise<typeof import("esbuild")> {
  try {
    return await import("esbuild");
  } catch {
    throw new EdgelimitError(
      "EL_MISSING_PACKAGE",
      "edgelimit build needs esbuild: install it next to edgelimit (npm install --save-dev esbuild)",
    );
  }
}
