/**
 * `edgelimit override set|list|remove`: operators' overrides in a store, from a shell
 * (docs/overrides.md). The same checks as `limiter.overrides` (core/override-admin.ts): `set`
 * reads the policy to know its rules and its `overrides` bounds; nothing is stored on a mistake.
 * A Worker's overrides live in a Durable Object that only the Worker reaches: there `--store
 * cloudflare+https://HOST/PATH` names the Worker's override route, which checks against the
 * policy it runs (the token from `EDGELIMIT_ADMIN_TOKEN`, never from the arguments).
 */
import { parseArgs } from "node:util";
import { parseDurationMs } from "../core/duration.js";
import { EdgelimitError } from "../core/errors.js";
import type { ResolvedPolicy } from "../core/model.js";
import { OverrideAdmin } from "../core/override-admin.js";
import { checkOverride, type Override, type OverrideInput } from "../core/overrides.js";
import { loadPolicy } from "../policy/load.js";
import { storeFromUrl } from "../stores/from-url.js";
import { parsedOrExit, usageError, writeEdgelimitError } from "./errors.js";
import { OVERRIDE_USAGE } from "./usage.js";
import { ADMIN_TOKEN_VARIABLE, isWorkerRoute, WorkerOverrideAdmin } from "./worker-overrides.js";

const fail = (message: string): number => usageError("override", OVERRIDE_USAGE, message);

export async function run(argv: string[]): Promise<number> {
  const parsed = parsedOrExit("override", OVERRIDE_USAGE, () => parse(argv));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  const [action, subject, ...extra] = positionals;
  if (action !== "set" && action !== "list" && action !== "remove") {
    return fail("say set, list or remove");
  }
  if (extra.length > 0) return fail(`unexpected ${extra.join(" ")}`);
  if (action !== "list" && subject === undefined) return fail(`${action} needs a SUBJECT`);
  if (values.store === undefined) return fail("--store URL is required");
  const worker = isWorkerRoute(values.store);
  // A Worker checks against the policy it runs; elsewhere the policy is read here.
  if (action === "set" && values.policy === undefined && !worker) {
    return fail("set needs --policy FILE");
  }
  const unreachable: string[] = [];
  let store: Awaited<ReturnType<typeof storeFromUrl>> | undefined;
  try {
    const policy: ResolvedPolicy | undefined =
      values.policy === undefined ? undefined : loadPolicy(values.policy);
    let admin: Pick<OverrideAdmin, "set" | "list" | "remove" | "changes">;
    if (worker) {
      admin = new WorkerOverrideAdmin(values.store, process.env[ADMIN_TOKEN_VARIABLE]);
    } else {
      store = await storeFromUrl(values.store, {
        onUnreachable: (cause) => unreachable.push(cause),
      });
      if (unreachable.length > 0) {
        throw new EdgelimitError("EL_STORE_FAILED", `the store is unreachable: ${unreachable[0]}`);
      }
      const source = store.overrides?.();
      if (source === undefined) {
        throw new EdgelimitError(
          "EL_OVERRIDE_STORE",
          `the ${store.name} store keeps no overrides yet; use memory, redis://, redis+cluster://, redis+https://, dynamodb:// or a Worker's route, cloudflare+https://HOST/PATH`,
        );
      }
      admin = new OverrideAdmin(source, () => policy as ResolvedPolicy, Date.now);
    }
    const target = { subject: subject as string, rule: values.rule, plan: values.plan };
    if (action === "set") {
      const input: OverrideInput = {
        ...target,
        limit: values.limit === undefined ? undefined : limitOf(values.limit),
        block: values.block === true ? (values.reason ?? true) : undefined,
        allow: values.allow,
        until: values.until === undefined ? undefined : untilOf(values.until),
        note: values.note,
      };
      // With a Worker, a policy given here is checked first too: a mistake never leaves the machine.
      if (worker && policy !== undefined) checkOverride(input, policy, Date.now());
      const override = await admin.set(input);
      process.stdout.write(
        values.json ? `${JSON.stringify(override)}\n` : `set ${line(override)}\n`,
      );
    } else if (action === "remove") {
      const removed = await admin.remove({ ...target, note: values.note });
      process.stdout.write(
        values.json
          ? `${JSON.stringify({ removed })}\n`
          : removed
            ? "removed\n"
            : "no such override\n",
      );
      if (!removed) return 1;
    } else {
      const overrides = await admin.list();
      if (values.json) process.stdout.write(`${JSON.stringify(overrides)}\n`);
      else if (overrides.length === 0) process.stdout.write("no overrides in force\n");
      else for (const override of overrides) process.stdout.write(`${line(override)}\n`);
      if (values.log !== undefined) {
        const changes = await admin.changes(limitOf(values.log));
        for (const change of changes) {
          process.stdout.write(
            `${new Date(change.at).toISOString()} ${change.action} ${change.subject} ${change.scope}${change.note === undefined ? "" : ` (${change.note})`}\n`,
          );
        }
      }
    }
    return 0;
  } catch (error) {
    if (writeEdgelimitError("override", error)) return 1;
    throw error;
  } finally {
    await store?.close?.();
  }
}

/** One override as a line: subject, scope, effect, expiry, note. */
function line(override: Override): string {
  const effect =
    override.effect === "limit"
      ? `limit ${override.limit}`
      : override.effect === "block"
        ? `block${override.reason === undefined ? "" : ` (${override.reason})`}`
        : "allow";
  const until =
    override.until === undefined ? "" : ` until ${new Date(override.until).toISOString()}`;
  const note = override.note === undefined ? "" : ` -- ${override.note}`;
  return `${override.subject} ${override.scope} ${effect}${until}${note}`;
}

function limitOf(text: string): number {
  if (!/^\d+$/.test(text)) {
    throw new EdgelimitError("EL_CLI_ARGUMENT", `"${text}" is not a whole number`);
  }
  return Number(text);
}

/** An ISO 8601 time, epoch milliseconds, or a duration from now (`2h`, `3d`). */
function untilOf(text: string): number | string {
  if (/^\d+$/.test(text) || !Number.isNaN(Date.parse(text))) return text;
  try {
    return Date.now() + parseDurationMs(text);
  } catch {
    return text; // checkOverride says why it is no time
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      store: { type: "string" },
      policy: { type: "string" },
      rule: { type: "string" },
      plan: { type: "string" },
      limit: { type: "string" },
      block: { type: "boolean" },
      reason: { type: "string" },
      allow: { type: "boolean" },
      until: { type: "string" },
      note: { type: "string" },
      log: { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}
