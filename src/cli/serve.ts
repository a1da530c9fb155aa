import { readFileSync } from "node:fs";
import { BlockList, isIPv6 } from "node:net";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type Logger, pino } from "pino";
import { createChallenge } from "../challenge/index.js";
import { challenges } from "../challenge/shared-secret.js";
import { EdgelimitError } from "../core/errors.js";
import { CidrSet, parseIp } from "../core/ip.js";
import type { Store } from "../core/types.js";
import { type DemoOrigin, demoSecret, startDemoOrigin } from "../gateway/demo-origin.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { createLists } from "../lists/index.js";
import { formatIssue, loadPolicy } from "../policy/load.js";
import { requireSecrets } from "../policy/secrets.js";
import type { ResolvedPolicy, SecretSource } from "../policy/types.js";
import { storeFromUrl } from "../stores/from-url.js";
import { redact } from "../stores/redact.js";
import { writeEdgelimitError } from "./errors.js";
import { untilStopped, watchPath } from "./lifecycle.js";
import { storeDownWarning } from "./store-down.js";
import { SERVE_USAGE } from "./usage.js";

const USAGE = SERVE_USAGE;

const DEFAULT_DEMO_POLICY = "../../examples/policies/cloudfront.yaml";

/** `edgelimit serve`: runs until SIGTERM or SIGINT, then drains and resolves to the exit code. */
export async function run(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        policy: { type: "string" },
        upstream: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        "admin-port": { type: "string" },
        "admin-host": { type: "string" },
        store: { type: "string" },
        demo: { type: "boolean", default: false },
        "no-limit": { type: "boolean", default: false },
        "log-sample": { type: "string" },
        "upstream-timeout": { type: "string" },
        "drain-timeout": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (error) {
    process.stderr.write(`edgelimit serve: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(USAGE);
    return 0;
  }
  const demo = values.demo === true;
  const policyFile =
    (values.policy as string | undefined) ??
    (demo ? fileURLToPath(new URL(DEFAULT_DEMO_POLICY, import.meta.url)) : undefined);
  if (policyFile === undefined || (values.upstream === undefined && !demo)) {
    process.stderr.write(
      `edgelimit serve: --policy and --upstream are required (or --demo)\n${USAGE}`,
    );
    return 2;
  }

  const logger = pino({ base: undefined });
  let policy: ResolvedPolicy;
  let port: number;
  let adminPort: number;
  let logSample: number;
  let upstreamTimeoutMs: number;
  let drainTimeoutMs: number;
  try {
    policy = loadPolicy(policyFile);
    port = integerFlag(values.port, "--port", 8080);
    adminPort = integerFlag(values["admin-port"], "--admin-port", 9090);
    upstreamTimeoutMs = integerFlag(values["upstream-timeout"], "--upstream-timeout", 30_000);
    drainTimeoutMs = integerFlag(values["drain-timeout"], "--drain-timeout", 10_000);
    logSample = rateFlag(values["log-sample"], 0.01);
    if (adminPort !== 0 && adminPort === port) {
      throw new EdgelimitError(
        "EL_CLI_ARGUMENT",
        `--admin-port ${adminPort} is the public port: the admin listener (dashboard, /metrics) never shares it; pick another port`,
      );
    }
  } catch (error) {
    printError(error);
    return error instanceof EdgelimitError && error.code === "EL_CLI_ARGUMENT" ? 2 : 1;
  }

  // The demo mints tokens for any plan (/demo/token) and signs with session secrets: it stays
  // on this machine unless --host says otherwise.
  const host = (values.host as string | undefined) ?? (demo ? "127.0.0.1" : "0.0.0.0");
  const adminHost = (values["admin-host"] as string | undefined) ?? "127.0.0.1";
  if (!isLoopback(adminHost)) {
    process.stderr.write(
      `edgelimit serve: warning: --admin-host ${adminHost} is not a loopback address: the dashboard, /metrics and /api/snapshot have no authentication and are reachable from the network; keep them behind a firewall or an authenticating proxy\n`,
    );
  }

  const env: Record<string, string | undefined> = { ...process.env };
  let mintedSecret: string | undefined;
  const secretSource = policy.identity.jwt?.secret;
  if (demo && secretSource !== undefined && "env" in secretSource && !env[secretSource.env]) {
    mintedSecret = demoSecret();
    env[secretSource.env] = mintedSecret;
  }
  // The demo is one process: a random challenge key of its own is enough there.
  const challengeSecret = policy.challenge.secret;
  let mintedChallengeSecret: string | undefined;
  if (
    demo &&
    challengeSecret !== undefined &&
    "env" in challengeSecret &&
    !env[challengeSecret.env]
  ) {
    mintedChallengeSecret = challengeSecret.env;
    env[challengeSecret.env] = demoSecret();
  }
  const readFile = (path: string) => readFileSync(path, "utf8");
  try {
    requireSecrets(policy, { env, readFile });
  } catch (error) {
    printError(error);
    return 1;
  }

  let store: Store | undefined;
  let demoOrigin: DemoOrigin | undefined;
  let gateway: Gateway;
  const storeUrl = (values.store as string | undefined) ?? "memory";
  try {
    store = await storeFromUrl(storeUrl, {
      onUnreachable: (cause) =>
        logger.warn({
          msg: storeDownWarning(policy),
          cause,
        }),
    });
    if (demo && values.upstream === undefined) {
      demoOrigin = await startDemoOrigin({
        jwtSecret: mintedSecret,
        originHeader: policy.headers.origin,
      });
    }
    const challenge = createChallenge(policy, { env, readFile });
    warnUnsharedChallenge(policy, logger);
    const lists = policy.lists.length > 0 ? await createLists(policy, { env, logger }) : undefined;
    gateway = createGateway({
      policy,
      store,
      upstream: (values.upstream as string | undefined) ?? (demoOrigin as DemoOrigin).url,
      port,
      host,
      adminPort,
      adminHost,
      limit: values["no-limit"] !== true,
      challenge,
      lists,
      env,
      readFile,
      logger,
      allowedLogSampleRate: logSample,
      upstreamTimeoutMs,
      drainTimeoutMs,
      storeLabel: redact(storeUrl),
    });
  } catch (error) {
    printError(error);
    await demoOrigin?.close();
    await store?.close?.();
    return 1;
  }

  let addresses: { url: string; adminUrl: string | undefined };
  try {
    addresses = await gateway.start();
  } catch (error) {
    printError(error);
    await gateway.close();
    await demoOrigin?.close();
    await store.close?.();
    return 1;
  }
  process.stdout.write(
    banner(
      policy,
      addresses,
      gateway.port ?? port,
      policyFile,
      redact(storeUrl),
      demoOrigin,
      mintedSecret,
      secretSource,
      mintedChallengeSecret,
      demo ? host : undefined,
    ),
  );
  logger.info({
    msg: "gateway started",
    port: gateway.port,
    adminPort: gateway.adminPort,
    policy: policyFile,
    rules: policy.rules.length,
  });

  // Reloads run one at a time, in order: building a policy's lists is asynchronous.
  let reloading: Promise<void> = Promise.resolve();
  const reload = (trigger: string) => {
    reloading = reloading.then(() => applyReload(trigger));
  };
  const applyReload = async (trigger: string): Promise<void> => {
    let lists: Awaited<ReturnType<typeof createLists>> | undefined;
    try {
      const next = loadPolicy(policyFile);
      requireSecrets(next, { env, readFile });
      // The challenge and the lists come from the policy too: rebuild them with it.
      const challenge = createChallenge(next, { env, readFile });
      warnUnsharedChallenge(next, logger);
      lists = next.lists.length > 0 ? await createLists(next, { env, logger }) : undefined;
      gateway.reload(next, { challenge, lists });
      logger.info({
        msg: "policy reloaded; counters kept",
        trigger,
        policy: policyFile,
        rules: next.rules.length,
      });
    } catch (error) {
      lists?.close();
      const issues = error instanceof EdgelimitError ? error.issues.map(formatIssue) : [];
      logger.error({
        msg: "policy reload refused; the running policy stays",
        trigger,
        policy: policyFile,
        code: error instanceof EdgelimitError ? error.code : undefined,
        error: issues.length > 0 ? issues : (error as Error).message,
      });
    }
  };
  const watcher = watchPath(policyFile, () => reload("file-change"), logger);
  const onHangup = () => reload("SIGHUP");
  process.on("SIGHUP", onHangup);

  return untilStopped(
    logger,
    async () => {
      watcher?.close();
      process.off("SIGHUP", onHangup);
      await gateway.close();
      await demoOrigin?.close();
      await store?.close?.();
    },
    () => ({ inFlight: gateway.inFlight }),
  );
}

/**
 * The gateway runs as one process, so a challenging policy without `challenge.secret` still
 * works: the process signs with a random key of its own. Another instance behind the same load
 * balancer, or this one after a restart, refuses those challenges and passes: say so.
 */
function warnUnsharedChallenge(policy: ResolvedPolicy, logger: Logger): void {
  if (!challenges(policy) || policy.challenge.secret !== undefined) return;
  logger.warn({
    msg: "challenge.secret is not set: challenges and passes are signed with a random key of this process, refused by any other instance and after a restart; set challenge.secret (for example { env: EDGELIMIT_CHALLENGE_SECRET }) when more than one instance serves the same clients",
  });
}

/** Who can reach the demo, which hands out tokens for any plan to whoever asks. */
function demoReach(host: string): string {
  return isLoopback(host)
    ? `demo: listening on ${host} only, this machine (--host 0.0.0.0 to let other machines in)`
    : `demo: WARNING: listening on ${host}: anyone who reaches it can mint tokens for any plan at /demo/token and spend this session's limits; use --host 127.0.0.1 unless that is what you want`;
}

/** Whether a listener stays on this machine: 127.0.0.0/8, ::1 or localhost. */
function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  const loopback = new BlockList();
  loopback.addSubnet("127.0.0.0", 8, "ipv4");
  loopback.addAddress("::1", "ipv6");
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  try {
    return loopback.check(bare, isIPv6(bare) ? "ipv6" : "ipv4");
  } catch {
    return false;
  }
}

function integerFlag(value: unknown, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65_535 * 1000) {
    throw new EdgelimitError(
      "EL_CLI_ARGUMENT",
      `${flag} must be a whole number; got "${String(value)}"`,
    );
  }
  return number;
}

function rateFlag(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isFinite(number) || number < 0 || number > 1) {
    throw new EdgelimitError(
      "EL_CLI_ARGUMENT",
      `--log-sample must be between 0 and 1; got "${String(value)}"`,
    );
  }
  return number;
}

/**
 * The banner's line for another client's counters, where the policy lets a curl on this machine
 * play one: an `X-Forwarded-For` is believed only from a trusted proxy, and loopback is trusted
 * here because a proxy on this machine would be. Said next to it, so that nobody takes it for a
 * way in: from elsewhere the header is ignored (the spoofing README says we prevent).
 */
function forwardedForLines(policy: ResolvedPolicy, base: string): string[] {
  const ip = policy.identity.ip;
  const loopbackTrusted = new CidrSet(ip.trustedProxies).has(parseIp("127.0.0.1"));
  if (ip.source !== "x-forwarded-for" || !loopbackTrusted) return [];
  return [
    `  curl -i -H "X-Forwarded-For: 203.0.113.7" ${base}/api/export   # counted as 203.0.113.7, with its own counters:`,
    "    # only from this machine: the policy trusts X-Forwarded-For from loopback peers (identity.ip.trustedProxies),",
    "    # as it would a proxy on the same machine. A client elsewhere is no trusted proxy: its X-Forwarded-For is",
    "    # ignored and it is counted by its own address, whatever it writes there.",
  ];
}

function printError(error: unknown): void {
  if (writeEdgelimitError("serve", error, (error as Error).message.split("\n")[0])) return;
  process.stderr.write(
    `edgelimit serve: ${error instanceof Error ? error.message : String(error)}\n`,
  );
}

function banner(
  policy: ResolvedPolicy,
  addresses: { url: string; adminUrl: string | undefined },
  port: number,
  policyFile: string,
  store: string,
  demoOrigin: DemoOrigin | undefined,
  mintedSecret: string | undefined,
  secretSource: SecretSource | undefined,
  mintedChallengeSecret: string | undefined,
  demoHost: string | undefined,
): string {
  const base = `http://127.0.0.1:${port}`;
  const lines = [
    "",
    `edgelimit gateway on ${addresses.url} (policy ${policyFile}, store ${store})`,
    demoHost === undefined ? "" : demoReach(demoHost),
    demoOrigin === undefined ? "" : `demo origin on ${demoOrigin.url} (DEMO ONLY)`,
    addresses.adminUrl === undefined
      ? ""
      : `dashboard and metrics: ${addresses.adminUrl}  (${addresses.adminUrl}metrics)`,
    "",
    "Try:",
    `  curl -i ${base}/api/search?q=shoes`,
    `  for i in $(seq 1 8); do curl -s -o /dev/null -w "%{http_code}\\n" ${base}/api/reports; done   # 5 allowed, then 429`,
    ...forwardedForLines(policy, base),
  ];
  if (mintedSecret !== undefined && secretSource !== undefined && "env" in secretSource) {
    lines.push(
      "",
      `${secretSource.env} was not set: a random secret was generated for this session (DEMO ONLY).`,
      "Get a demo token and call as an authenticated pro user:",
      `  TOKEN=$(curl -s "${base}/demo/token?sub=u1&plan=pro" | sed -E 's/.*"token":"([^"]+)".*/\\1/')`,
      `  curl -i -H "Authorization: Bearer $TOKEN" ${base}/api/reports`,
    );
  }
  if (mintedChallengeSecret !== undefined) {
    lines.push(
      "",
      `${mintedChallengeSecret} was not set: challenges and passes are signed with a random key of this process (DEMO ONLY; every instance of a real deployment needs the same one).`,
    );
  }
  lines.push(
    "",
    "Reload the policy: edit the file or kill -HUP <pid>. Stop: Ctrl-C (drains in-flight requests).",
    "",
  );
  return `${lines.filter((line, index, all) => line !== "" || all[index - 1] !== "").join("\n")}\n`;
}
