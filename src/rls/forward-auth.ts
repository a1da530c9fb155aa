/**
 * Forward-auth (`/check/PROXY`): nginx `auth_request`, Caddy `forward_auth`, Traefik
 * `ForwardAuth` and HAProxy (a Lua action) ask about the request they are holding, which they
 * describe in headers. Which headers depends on the proxy, and so does who else can write them:
 * nginx's subrequest carries every header of the client as it came, so a client's own
 * `X-Forwarded-Uri` reaches us through nginx untouched, where Caddy would have replaced it. A
 * header is therefore believed only from the proxy that sets it itself, replacing whatever the
 * client sent, and the proxy names itself in the path it asks (its configuration, never the
 * client, chooses that path):
 *
 * | path              | method               | path and query     | set by                     |
 * | `/check/nginx`    | `X-Original-Method`  | `X-Original-URI`   | examples/rls/nginx.conf    |
 * | `/check/caddy`    | `X-Forwarded-Method` | `X-Forwarded-Uri`  | `forward_auth` itself      |
 * | `/check/traefik`  | `X-Forwarded-Method` | `X-Forwarded-Uri`  | `ForwardAuth` itself       |
 * | `/check/haproxy`  | `X-Forwarded-Method` | `X-Forwarded-Uri`  | examples/rls/edgelimit.lua |
 *
 * Every path reads the client from `X-Forwarded-For`, which each of them sets (appending the
 * address it saw), believed only as the policy believes that header: walked right to left over
 * `identity.ip.trustedProxies`, so what a client writes there is never reached. Nothing else
 * describes the request: not the other proxies' headers, not `X-Real-IP`, `Forwarded` or
 * `X-Forwarded-Host`. The rest of the headers go to the policy as the client sent them
 * (`Authorization` for its JWTs, cookies for challenge passes). A header that is missing or
 * arrives twice means the proxy is not configured as the examples are: the answer is a 500 that
 * says what to fix (a proxy turns it into an error, never into a pass), and `/check` without a
 * known proxy is a 503 (refused by every configuration, including those written for `/check`).
 *
 * The answer: 200 with the rate-limit headers and the origin's header when allowed; 429 with
 * `Retry-After` and the JSON body when blocked; 302 to the challenge page when challenged; 503
 * when a fail-closed rule's store failed. nginx's `auth_request` passes on only 401 and 403, so
 * `/check/nginx` answers a challenge with 401 and any other refusal with 403. Every answer says
 * what it is in `X-Edgelimit-Action`, for a proxy to branch on.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { RequestDescription } from "../core/types.js";
import type { Verdict } from "../http/respond.js";

export const ACTION_HEADER = "x-edgelimit-action";
export const CHECK_PATH = "/check";

interface ProxyHeaders {
  readonly method: string;
  readonly uri: string;
  /** What sets them, for the answer when one is missing. */
  readonly setBy: string;
  /** nginx's `auth_request` passes on only 401 and 403 (see the file's comment). */
  readonly denyWith403: boolean;
}

const FORWARDED = { method: "x-forwarded-method", uri: "x-forwarded-uri" } as const;

/** The proxies `/check/PROXY` answers, each with the headers it sets itself. */
const PROXIES: ReadonlyMap<string, ProxyHeaders> = new Map([
  [
    "nginx",
    {
      method: "x-original-method",
      uri: "x-original-uri",
      setBy:
        "the auth_request location must set them: proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Original-Method $request_method; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for (examples/rls/nginx.conf)",
      denyWith403: true,
    },
  ],
  ["caddy", { ...FORWARDED, setBy: "Caddy's forward_auth sets them", denyWith403: false }],
  ["traefik", { ...FORWARDED, setBy: "Traefik's ForwardAuth sets them", denyWith403: false }],
  ["haproxy", { ...FORWARDED, setBy: "examples/rls/edgelimit.lua sets them", denyWith403: false }],
]);

export const FORWARD_AUTH_PROXIES: readonly string[] = [...PROXIES.keys()];

/** The request a proxy describes, or why it cannot be believed (a status and a message). */
export type Forwarded =
  | {
      readonly request: RequestDescription;
      readonly denyWith403: boolean;
      readonly problem?: undefined;
    }
  | { readonly problem: string; readonly status: number };

/** What `describeForwarded` reads of an incoming request (node's `IncomingMessage` has both). */
export interface ForwardedHeaders {
  readonly headers: IncomingHttpHeaders;
  /** Every header line as it came, name and value in turn (node's `rawHeaders`). */
  readonly rawHeaders: readonly string[];
}

/**
 * The first value of header `name` (lower case) and how many lines carried it, from the raw
 * lines: node's `headersDistinct` would build an array for every header of every call to say
 * the same of three.
 */
function linesOf(
  rawHeaders: readonly string[],
  name: string,
): { readonly first: string; readonly count: number } {
  let first = "";
  let count = 0;
  for (let at = 0; at < rawHeaders.length; at += 2) {
    const line = rawHeaders[at] as string;
    if (line.length !== name.length || line.toLowerCase() !== name) continue;
    if (count === 0) first = rawHeaders[at + 1] as string;
    count++;
  }
  return { first, count };
}

/** The request behind a call of `checkPath` (`/check/nginx`, ...), as that proxy describes it. */
export function describeForwarded(
  checkPath: string,
  incoming: ForwardedHeaders,
  peer: string | undefined,
): Forwarded {
  const name = checkPath.startsWith(`${CHECK_PATH}/`) ? checkPath.slice(CHECK_PATH.length + 1) : "";
  const proxy = PROXIES.get(name);
  if (proxy === undefined) {
    // 503, not 404: a proxy configured for the `/check` of earlier versions (or a mistyped name)
    // must refuse its requests, and every shipped configuration, old or new, refuses a 503.
    return {
      status: 503,
      problem: `not found: forward-auth is asked at ${FORWARD_AUTH_PROXIES.map((known) => `${CHECK_PATH}/${known}`).join(", ")}, the path naming the proxy that asks, whose own headers alone describe the request (docs/forward-auth.md)\n`,
    };
  }
  const missing: string[] = [];
  const repeated: string[] = [];
  const single = (header: string): string => {
    const { first, count } = linesOf(incoming.rawHeaders, header);
    if (count === 0 || first === "") missing.push(header);
    else if (count > 1) repeated.push(header);
    return first;
  };
  const method = single(proxy.method);
  const path = escapeRawBytes(single(proxy.uri));
  if (linesOf(incoming.rawHeaders, "x-forwarded-for").count === 0) {
    missing.push("x-forwarded-for");
  }
  if (missing.length > 0 || repeated.length > 0) {
    const said = [
      missing.length > 0 ? `${missing.join(", ")} missing` : "",
      repeated.length > 0 ? `${repeated.join(", ")} sent more than once` : "",
    ].filter((part) => part !== "");
    return {
      status: 500,
      problem: `${CHECK_PATH}/${name} reads the request from headers that ${name} sets, replacing any the client sent; this call had ${said.join(" and ")}: ${proxy.setBy}\n`,
    };
  }
  return {
    request: { ip: peer, method, path, headers: incoming.headers, lowerCaseHeaders: true },
    denyWith403: proxy.denyWith403,
  };
}

export interface ForwardAuthAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * The verdict as the proxy is to read it; `denyWith403` for nginx (see the file's comment). The
 * headers, `content-length` included, are copied key by key into one object: spreading the
 * verdict's headers cost ten times as much (`bench/rls.bench.ts`, part 5).
 */
export function forwardAuthAnswer(verdict: Verdict, denyWith403: boolean): ForwardAuthAnswer {
  const allow = verdict.action === "allow";
  const body = allow ? "" : (verdict.body ?? "");
  const headers: Record<string, string> = {};
  copyInto(headers, verdict.headers);
  headers[ACTION_HEADER] = verdict.action;
  if (allow) copyInto(headers, verdict.originHeaders);
  headers["content-length"] = String(Buffer.byteLength(body));
  const status = allow
    ? 200
    : !denyWith403
      ? verdict.status
      : verdict.action === "challenge"
        ? 401
        : 403;
  return { status, headers, body };
}

function copyInto(into: Record<string, string>, from: Readonly<Record<string, string>>): void {
  for (const key in from) into[key] = from[key] as string;
}

/**
 * A proxy copies the request line's URI into its header as the bytes the client sent
 * (`$request_uri`, Caddy's `RequestURI`), and a client may send UTF-8 there unescaped; Node reads a
 * header's bytes as Latin-1, one character each. Each byte of 0x80 and above becomes its `%XX`
 * escape, so `/pr\xc3\xa9f` is `/pr%C3%A9f`, the form the policy's `/préf` key is matched in,
 * never a different path that no rule names.
 */
export function escapeRawBytes(uri: string): string {
  return uri.replace(
    /[\x80-\xff]/g,
    (byte) => `%${byte.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`,
  );
}
