import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { type Logger, pino } from "pino";
import { createChallenge } from "../challenge/index.js";
import { EdgelimitError } from "../core/errors.js";
import type { ChallengeHandler, Store } from "../core/types.js";
import { createLists } from "../lists/index.js";
import { formatIssue, loadPolicy } from "../policy/load.js";
import { requireSecrets } from "../policy/secrets.js";
import type { ResolvedPolicy } from "../policy/types.js";
import { type LoadedConfig, loadRlsConfig } from "../rls/config-files.js";
import { type RlsEnvironment, readEnvironment } from "../rls/environment.js";
import { RlsServer } from "../rls/server.js";
import { storeFromUrl } from "../stores/from-url.js";
import { redact } from "../stores/redact.js";
import { parsedOrExit, usageError, writeEdgelimitError } from "./errors.js";
import { untilStopped, watchPath } from "./lifecycle.js";
import { RLS_USAGE } from "./usage.js";

/** `edgelimit rls`: runs until SIGTERM or SIGINT, then drains and resolves to the exit code. */
export async function run(argv: string[]): Promise<number> {
  const parsed = parsedOrExit("rls", RLS_USAGE, () =>
    parseArgs({
      args: argv,
      options: {
        config: { type: "string" },
        policy: { type: "string" },
        store: { type: "string" },
        "grpc-port": { type: "string" },
        "http-port": { type: "string" },
        "admin-port": { type: "string" },
        host: { type: "string" },
        "max-descriptor-bytes": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    }),
  );
  if (typeof parsed === "number") return parsed;
  const { values } = parsed;

  let environment: RlsEnvironment;
  let ports: { grpc: number; http: number; admin: number };
  let maxDescriptorBytes: number | undefined;
  try {
    environment = readEnvironment(process.env);
    ports = {
      grpc: portFlag(values["grpc-port"] ?? environment.grpcPort, "--grpc-port (GRPC_PORT)", 8081),
      http: portFlag(values["http-port"] ?? environment.httpPort, "--http-port (PORT)", 8080),
      admin: portFlag(values["admin-port"], "--admin-port", 9090),
    };
    maxDescriptorBytes = bytesFlag(values["max-descriptor-bytes"], "--max-descriptor-bytes");
    const clash = [ports.grpc, ports.http].find((port) => port !== 0 && port === ports.admin);
    if (clash !== undefined) {
      throw new EdgelimitError(
        "EL_CLI_ARGUMENT",
        `--admin-port ${clash} is also a public port: the admin listener (dashboard, /metrics) never shares one; pick another port`,
      );
    }
  } catch (error) {
    return usageError("rls", RLS_USAGE, (error as Error).message);
  }
  const configPath = values.config ?? environment.configPath;
  const policyFile = values.policy;
  if (configPath === undefined && policyFile === undefined) {
    return usageError(
      "rls",
      RLS_USAGE,
      "give --config PATH (envoyproxy/ratelimit's YAML, or RUNTIME_ROOT), --policy FILE, or both",
    );
  }

  const logger = pino({ base: undefined });
  for (const note of environment.notes) logger.warn({ msg: note });
  const env: Record<string, string | undefined> = { ...process.env };
  const readFile = (path: string) => readFileSync(path, "utf8");
  const build = { mergeDomains: environment.mergeDomains, globalShadow: environment.globalShadow };
  let loaded: LoadedConfig | undefined;
  let policy: ResolvedPolicy | undefined;
  try {
    if (configPath !== undefined) {
      loaded = loadRlsConfig(configPath, build);
      logConfigWarnings(loaded, logger);
    }
    if (policyFile !== undefined) {
      policy = loadPolicy(policyFile);
      requireSecrets(policy, { env, readFile });
      warnUntrustedProxies(policy, logger);
    }
  } catch (error) {
    printError(error);
    return 1;
  }

  const storeUrl = values.store ?? environment.storeUrl ?? "memory";
  let store: Store | undefined;
  let server: RlsServer;
  let lists: Awaited<ReturnType<typeof createLists>> | undefined;
  try {
    store = await storeFromUrl(storeUrl, {
      onUnreachable: (cause) =>
        logger.warn({
          msg: "the store is not reachable at start: decisions take their fail modes until it is",
          cause,
        }),
    });
    const challenge = policy === undefined ? undefined : createChallenge(policy, { env, readFile });
    lists =
      policy !== undefined && policy.lists.length > 0
        ? await createLists(policy, { env, logger })
        : undefined;
    server = new RlsServer({
      store,
      config: loaded?.config,
      policy,
      challenge,
      companions: { allowlists: lists?.allow, denylists: lists?.deny },
      globalShadow: environment.globalShadow,
      limitHeaders: environment.limitHeaders,
      grpcPort: ports.grpc,
      grpcHost: values.host ?? environment.grpcHost ?? "0.0.0.0",
      httpPort: ports.http,
      httpHost: values.host ?? environment.httpHost ?? "0.0.0.0",
      adminPort: ports.admin,
      adminHost: "127.0.0.1",
      env,
      readFile,
      logger,
      storeLabel: redact(storeUrl),
      requestLimits: { maxDescriptorBytes },
    });
  } catch (error) {
    printError(error);
    lists?.close();
    await store?.close?.();
    return 1;
  }

  let addresses: Awaited<ReturnType<RlsServer["start"]>>;
  try {
    addresses = await server.start();
  } catch (error) {
    printError(error);
    lists?.close();
    await store.close?.();
    return 1;
  }
  logger.info({
    msg: "rate limit service started",
    grpcPort: addresses.grpcPort,
    httpPort: addresses.httpPort,
    admin: addresses.adminUrl,
    config: configPath,
    domains: loaded === undefined ? undefined : [...loaded.config.domains.keys()],
    policy: policyFile,
    store: redact(storeUrl),
  });

  // Reloads run one at a time, in order: building a policy's lists is asynchronous.
  let fingerprint = loaded?.fingerprint;
  let reloading: Promise<void> = Promise.resolve();
  const reloadConfig = (trigger: string): void => {
    if (configPath === undefined) return;
    reloading = reloading.then(() => {
      try {
        const next = loadRlsConfig(configPath, build);
        if (next.fingerprint === fingerprint) return;
        logConfigWarnings(next, logger);
        server.useConfig(next.config);
        fingerprint = next.fingerprint;
        logger.info({
          msg: "configuration reloaded; counters kept",
          trigger,
          config: configPath,
          domains: [...next.config.domains.keys()],
        });
      } catch (error) {
        server.metrics.recordReload("config", "refused");
        logRefusedReload(
          logger,
          "configuration reload refused; the running configuration stays",
          trigger,
          error,
        );
      }
    });
  };
  const reloadPolicy = (trigger: string): void => {
    if (policyFile === undefined) return;
    reloading = reloading.then(async () => {
      let nextLists: typeof lists;
      try {
        const next = loadPolicy(policyFile);
        requireSecrets(next, { env, readFile });
        const challenge: ChallengeHandler | undefined = createChallenge(next, { env, readFile });
        nextLists = next.lists.length > 0 ? await createLists(next, { env, logger }) : undefined;
        server.usePolicy(next, {
          challenge,
          allowlists: nextLists?.allow,
          denylists: nextLists?.deny,
        });
        lists?.close();
        lists = nextLists;
        warnUntrustedProxies(next, logger);
        logger.info({ msg: "policy reloaded; counters kept", trigger, policy: policyFile });
      } catch (error) {
        nextLists?.close();
        logRefusedReload(logger, "policy reload refused; the running policy stays", trigger, error);
      }
    });
  };
  const watchers = [
    configPath === undefined
      ? undefined
      : watchPath(configPath, () => reloadConfig("file-change"), logger),
    policyFile === undefined
      ? undefined
      : watchPath(policyFile, () => reloadPolicy("file-change"), logger),
  ];
  const onHangup = (): void => {
    reloadConfig("SIGHUP");
    reloadPolicy("SIGHUP");
  };
  process.on("SIGHUP", onHangup);

  return untilStopped(logger, async () => {
    for (const watcher of watchers) watcher?.close();
    process.off("SIGHUP", onHangup);
    await server.close();
    lists?.close();
    await store?.close?.();
  });
}

function logConfigWarnings(loaded: LoadedConfig, logger: Logger): void {
  for (const warning of loaded.warnings) logger.warn({ msg: formatIssue(warning) });
  if (loaded.config.domains.size === 0) {
    logger.warn({ msg: "the configuration has no domain: every descriptor is answered OK" });
  }
}

function logRefusedReload(logger: Logger, msg: string, trigger: string, error: unknown): void {
  const issues = error instanceof EdgelimitError ? error.issues.map(formatIssue) : [];
  logger.error({
    msg,
    trigger,
    code: error instanceof EdgelimitError ? error.code : undefined,
    error: issues.length > 0 ? issues : (error as Error).message,
  });
}

/**
 * The proxies describe the client; a policy that takes the socket peer as the client would
 * count every request as the proxy's.
 */
function warnUntrustedProxies(policy: ResolvedPolicy, logger: Logger): void {
  if (policy.identity.ip.source === "x-forwarded-for") return;
  logger.warn({
    msg: `the policy's identity.ip.source is ${policy.identity.ip.source}: behind edgelimit rls, the socket peer is the proxy, so every client would count as the proxy's address; set identity.ip.source: x-forwarded-for and list the proxies in identity.ip.trustedProxies`,
  });
}

function portFlag(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65_535) {
    throw new EdgelimitError(
      "EL_CLI_ARGUMENT",
      `${flag} must be a port number (0 to 65535); got "${value}"`,
    );
  }
  return number;
}

function bytesFlag(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number) || number < 1) {
    throw new EdgelimitError(
      "EL_CLI_ARGUMENT",
      `${flag} must be a whole number of bytes, at least 1; got "${value}"`,
    );
  }
  return number;
}

function printError(error: unknown): void {
  if (writeEdgelimitError("rls", error, (error as Error).message.split("\n")[0])) return;
  process.stderr.write(
    `edgelimit rls: ${error instanceof Error ? error.message : String(error)}\n`,
  );
}
