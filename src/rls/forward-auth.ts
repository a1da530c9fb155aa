/**
 * Forward-auth (`/check`): nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth` and
 * HAProxy ask about the request they are holding, which they describe in headers:
 *
 * - the method: `X-Forwarded-Method` (Caddy, Traefik), else `X-Original-Method` (nginx
 *   configurations set it), else GET;
 * - the path: `X-Forwarded-Uri` (Caddy, Traefik), else `X-Original-URI` (nginx), else `/`;
 * - the client: `X-Forwarded-For` (or, without it, `X-Real-IP`), believed only as the policy
 *   believes `X-Forwarded-For`: walked right to left over `identity.ip.trustedProxies`, which
 *   must list the proxy; anything else counts as the proxy's own address;
 * - everything else as the client sent it (`Authorization` for the policy's JWTs, cookies for
 *   challenge passes).
 *
 * The answer: 200 with the rate-limit headers and the origin's header when allowed; 429 with
 * `Retry-After` and the JSON body when blocked (403 with `?deny=403`, for nginx, whose
 * `auth_request` passes on only 401 and 403); 302 to the challenge page when challenged (401
 * with `?deny=403`); 503 when a fail-closed rule's store failed (403 with `?deny=403`). Every
 * answer says what it is in `X-Edgelimit-Action`, for a proxy to branch on.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { RequestDescription } from "../core/types.js";
import type { Verdict } from "../http/respond.js";

export const ACTION_HEADER = "x-edgelimit-action";

export function describeForwarded(
  headers: IncomingHttpHeaders,
  peer: string | undefined,
): RequestDescription {
  const forwardedFor = headers["x-forwarded-for"] ?? headers["x-real-ip"];
  return {
    ip: peer,
    method: first(headers["x-forwarded-method"]) ?? first(headers["x-original-method"]) ?? "GET",
    path: first(headers["x-forwarded-uri"]) ?? first(headers["x-original-uri"]) ?? "/",
    headers:
      forwardedFor === headers["x-forwarded-for"]
        ? headers
        : { ...headers, "x-forwarded-for": forwardedFor },
    lowerCaseHeaders: true,
  };
}

export interface ForwardAuthAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** The verdict as the proxy is to read it; `denyWith403` for nginx (see the file's comment). */
export function forwardAuthAnswer(verdict: Verdict, denyWith403: boolean): ForwardAuthAnswer {
  const headers: Record<string, string> = { ...verdict.headers, [ACTION_HEADER]: verdict.action };
  if (verdict.action === "allow") {
    Object.assign(headers, verdict.originHeaders);
    return { status: 200, headers, body: "" };
  }
  const body = verdict.body ?? "";
  if (!denyWith403) return { status: verdict.status, headers, body };
  return { status: verdict.action === "challenge" ? 401 : 403, headers, body };
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
