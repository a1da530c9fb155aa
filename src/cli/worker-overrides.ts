/**
 * An operator's side of a Worker's override route (adapters/cloudflare/override-route.ts): what `edgelimit
 * override --store cloudflare+https://HOST/PATH` uses instead of opening a store, since the
 * Durable Object is reachable only through the Worker. The same four calls as `OverrideAdmin`;
 * the Worker checks each `set` against the policy it runs, and its errors come back as
 * `EdgelimitError`s with the same codes.
 */
import { EdgelimitError, type ErrorCode } from "../core/errors.js";
import type { Override, OverrideChange, OverrideInput, OverrideTarget } from "../core/overrides.js";
import { httpEndpoint } from "../stores/store-url.js";

/** The URL schemes that name a Worker's override route. */
export const WORKER_ROUTE_SCHEMES = ["cloudflare+https://", "cloudflare+http://"] as const;
/** Where the CLI reads the route's bearer token (never from its arguments). */
export const ADMIN_TOKEN_VARIABLE = "EDGELIMIT_ADMIN_TOKEN";

/** Whether `url` names a Worker's override route (`cloudflare+https://HOST/PATH`). */
export function isWorkerRoute(url: string): boolean {
  const lower = url.trim().toLowerCase();
  return WORKER_ROUTE_SCHEMES.some((scheme) => lower.startsWith(scheme));
}

export class WorkerOverrideAdmin {
  readonly #endpoint: URL;
  readonly #token: string;

  /** `url`: `cloudflare+https://HOST/PATH` (`cloudflare+http://` for `wrangler dev`). */
  constructor(url: string, token: string | undefined) {
    this.#endpoint = httpEndpoint(url.trim().slice("cloudflare+".length), {
      option: "--store",
      example: "cloudflare+https://HOST/PATH, the Worker's override route",
      plainHttp: "wrangler dev on this machine",
      credentials: `put the route's token in ${ADMIN_TOKEN_VARIABLE}`,
    });
    if (token === undefined || token === "") {
      throw new EdgelimitError(
        "EL_OVERRIDE_ADMIN",
        `the Worker's override route needs its token in ${ADMIN_TOKEN_VARIABLE} (the Worker's secret of that name; docs/cloudflare.md)`,
      );
    }
    this.#token = token;
  }

  async set(input: OverrideInput): Promise<Override> {
    const until = input.until instanceof Date ? input.until.getTime() : input.until;
    const answer = await this.#call("POST", { ...input, until });
    return (answer as { override: Override }).override;
  }

  async list(): Promise<Override[]> {
    return ((await this.#call("GET")) as { overrides: Override[] }).overrides;
  }

  async remove(target: OverrideTarget & { readonly note?: string | undefined }): Promise<boolean> {
    return ((await this.#call("DELETE", target)) as { removed: boolean }).removed;
  }

  async changes(count = 100): Promise<readonly OverrideChange[]> {
    const answer = await this.#call("GET", undefined, `log=${count}`);
    return (answer as { changes: OverrideChange[] }).changes;
  }

  async #call(method: string, body?: unknown, query?: string): Promise<unknown> {
    const url = new URL(this.#endpoint);
    if (query !== undefined) url.search = query;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.#token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `the Worker's override route at ${url.origin}${url.pathname} did not answer: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    const text = await response.text();
    let answer: { error?: ErrorCode; message?: string } | undefined;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = undefined;
    }
    if (response.ok && answer !== undefined) return answer;
    if (answer?.error !== undefined && answer.message !== undefined) {
      throw new EdgelimitError(answer.error, answer.message);
    }
    throw new EdgelimitError(
      "EL_OVERRIDE_ADMIN",
      `the Worker answered ${response.status} at ${url.origin}${url.pathname}: is the override route on there (overrides.admin) and is this its path?`,
    );
  }
}
