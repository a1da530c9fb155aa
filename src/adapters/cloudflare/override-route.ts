/**
 * The Worker's admin route for operators' overrides, opt-in (`overrides.admin`): what
 * `edgelimit override set|list|remove --store cloudflare+https://HOST/PATH` talks to
 * (cli/worker-overrides.ts). Every call carries `Authorization: Bearer <token>`, the token being the
 * Worker's secret named by `overrides.admin.secret`; it is compared in constant time (both
 * sides hashed, every byte compared), and a missing or wrong one is refused with 401 before
 * anything is read or stored.
 *
 * The route runs the limiter's own `OverrideAdmin`: a `set` is checked against the policy this
 * Worker runs (the same `EL_OVERRIDE_*` errors as every store, nothing stored on one), and a
 * change applies at once in the isolate that answered it, in the others within their refresh.
 *
 *   GET    PATH[?log=N]  -> { overrides: [...], changes?: [...] }
 *   POST   PATH  { subject, rule?, plan?, limit? | block? | allow?, until?, note? } -> { override }
 *   DELETE PATH  { subject, rule?, plan?, note? } -> { removed }
 *   errors       -> { error: "EL_…", message }
 */
import { EdgelimitError } from "../../core/errors.js";
import type { OverrideAdmin } from "../../core/override-admin.js";
import type { OverrideInput } from "../../core/overrides.js";
import type { WorkerEnv } from "./bindings.js";

export interface OverrideRouteOptions {
  /** The route's path (default `/__edgelimit/overrides`). */
  readonly path?: string;
  /** The name of the Worker secret holding the bearer token (default `EDGELIMIT_ADMIN_TOKEN`). */
  readonly secret?: string;
}

export const DEFAULT_OVERRIDE_ROUTE = "/__edgelimit/overrides";
export const DEFAULT_OVERRIDE_SECRET = "EDGELIMIT_ADMIN_TOKEN";
/** The longest body the route reads: an override is well under 4 KB. */
const MAX_BODY = 16_384;
/** A shorter token could be guessed: the route refuses to run with one. */
const MIN_TOKEN = 16;
const INPUT_TEXT = ["subject", "rule", "plan", "note"] as const;

/** Answers one call of the admin route. `admin` is the limiter's (made on first use). */
export async function answerOverrideRoute(
  request: Request,
  env: WorkerEnv,
  options: OverrideRouteOptions,
  admin: () => OverrideAdmin,
): Promise<Response> {
  const secretName = options.secret ?? DEFAULT_OVERRIDE_SECRET;
  const token = env[secretName];
  if (typeof token !== "string" || token.length < MIN_TOKEN) {
    return refusal(
      503,
      "EL_OVERRIDE_ADMIN",
      `the override route is on but the Worker secret ${secretName} is not set (or shorter than ${MIN_TOKEN} characters): npx wrangler secret put ${secretName}`,
    );
  }
  const presented = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1];
  if (presented === undefined || !(await sameSecret(presented, token))) {
    return refusal(
      401,
      "EL_OVERRIDE_ADMIN",
      "the override route needs Authorization: Bearer <the Worker's admin token>",
    );
  }
  try {
    if (request.method === "GET") {
      const log = new URL(request.url).searchParams.get("log");
      const overrides = await admin().list();
      if (log === null) return Response.json({ overrides });
      return Response.json({ overrides, changes: await admin().changes(countOf(log)) });
    }
    if (request.method === "POST") {
      return Response.json({ override: await admin().set(await inputOf(request)) });
    }
    if (request.method === "DELETE") {
      const { subject, rule, plan, note } = await inputOf(request);
      return Response.json({ removed: await admin().remove({ subject, rule, plan, note }) });
    }
    return new Response("use GET, POST or DELETE", {
      status: 405,
      headers: { allow: "GET, POST, DELETE" },
    });
  } catch (error) {
    if (!(error instanceof EdgelimitError)) throw error;
    const status =
      error.code === "EL_OVERRIDE_FULL" ? 409 : error.code.startsWith("EL_STORE") ? 502 : 400;
    return refusal(status, error.code, error.message);
  }
}

/** Whether `path` is the route's (`options.path`, default `/__edgelimit/overrides`). */
export function isOverrideRoute(request: Request, options: OverrideRouteOptions): boolean {
  return new URL(request.url).pathname === (options.path ?? DEFAULT_OVERRIDE_ROUTE);
}

/**
 * Compares in time that does not depend on where the two differ, nor on the token's length:
 * both are hashed first, and every byte of the hashes is compared.
 */
async function sameSecret(presented: string, token: string): Promise<boolean> {
  const encoder = new TextEncoder();
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(presented)),
    crypto.subtle.digest("SHA-256", encoder.encode(token)),
  ]);
  const left = new Uint8Array(a);
  const right = new Uint8Array(b);
  let difference = 0;
  for (let i = 0; i < left.length; i++) difference |= (left[i] as number) ^ (right[i] as number);
  return difference === 0;
}

/** The body as an override's input: only its fields, the text ones as text. */
async function inputOf(request: Request): Promise<OverrideInput & { subject: string }> {
  const text = await request.text();
  let body: unknown;
  try {
    if (text.length > MAX_BODY) throw new RangeError("too long");
    body = JSON.parse(text);
  } catch {
    throw new EdgelimitError(
      "EL_OVERRIDE_INVALID",
      `the body must be a JSON object of at most ${MAX_BODY} characters, such as {"subject":"user:u_abc","limit":5000}`,
    );
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new EdgelimitError("EL_OVERRIDE_INVALID", "the body must be a JSON object");
  }
  const fields = body as Record<string, unknown>;
  for (const name of INPUT_TEXT) {
    if (fields[name] !== undefined && typeof fields[name] !== "string") {
      throw new EdgelimitError("EL_OVERRIDE_INVALID", `an override's ${name} is text`);
    }
  }
  return {
    subject: fields.subject as string,
    rule: fields.rule as string | undefined,
    plan: fields.plan as string | undefined,
    limit: fields.limit as number | undefined,
    block: fields.block as boolean | string | undefined,
    allow: fields.allow as boolean | undefined,
    until: fields.until as number | string | undefined,
    note: fields.note as string | undefined,
  };
}

function countOf(text: string): number {
  const count = Number(text);
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new EdgelimitError("EL_OVERRIDE_INVALID", `log=${text} is not a whole number`);
  }
  return count;
}

function refusal(status: number, code: string, message: string): Response {
  const headers: Record<string, string> = { "cache-control": "no-store" };
  if (status === 401) headers["www-authenticate"] = 'Bearer realm="edgelimit overrides"';
  return Response.json({ error: code, message }, { status, headers });
}
