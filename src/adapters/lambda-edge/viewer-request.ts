import type { ResolvedPolicy } from "../../core/model.js";
import {
  checkOptions,
  fields,
  type OptionsShape,
  POLICY,
  required,
  STORE,
} from "../../core/options.js";
import type { SecretContext } from "../../core/secrets.js";
import type { PassVerifier, RequestDescription, Store } from "../../core/types.js";
import {
  Guard,
  type GuardAction,
  type GuardOptions,
  type GuardTranslation,
} from "../../http/guard.js";
import { GUARD_OPTIONS } from "../../http/guard-options.js";
import type { Verdict } from "../../http/respond.js";
import {
  type AddressList,
  createLimiter,
  type Limiter,
  type LimiterOptions,
} from "../../limiter.js";
import {
  type CloudFrontHeaders,
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResultResponse,
  HANDOVER_HEADER,
  setHeader,
  toCloudFrontHeaders,
} from "./events.js";
import { EMF_OPTIONS, type EmfOptions, emfRecorder } from "./metrics.js";

/**
 * `skip`, `cost`, `user`, `onRefused` and `challenge` are every adapter's (see `GuardOptions`),
 * as functions of the CloudFront request. The challenge page and its verification are served
 * under its path at the edge (the CloudFront association needs `includeBody` for the
 * verification POST).
 */
export interface ViewerRequestOptions
  extends SecretContext,
    GuardOptions<[request: CloudFrontRequest], CloudFrontOnRefused> {
  readonly policy: ResolvedPolicy;
  readonly store: Store;
  readonly clock?: () => number;
  /** Verifies challenge passes (default: the challenge's own). */
  readonly passes?: PassVerifier;
  /** Refreshing allowlist sources (S3 JSON, a DynamoDB item), consulted after the policy's own. */
  readonly allowlists?: readonly AddressList[];
  readonly denylists?: readonly AddressList[];
  /** CloudWatch EMF lines per decision (default on); `false` turns them off. */
  readonly metrics?: false | EmfOptions;
  readonly onDecision?: (verdict: Verdict, request: RequestDescription) => void;
  /**
   * Operators' overrides (docs/overrides.md): `edgeOverrides(store, { policy })` reads them from
   * the DynamoDB table, refreshed by requests (a frozen instance runs no timer). Default
   * `false`: none are read; `edgelimit build` turns them on for a policy with an `overrides:`
   * section.
   */
  readonly overrides?: LimiterOptions["overrides"];
}

/**
 * The answer to a refused request instead of the default (429 with a JSON body, 302 to the
 * challenge, 503 when failing closed); the verdict's `headers` are added to it, except those it
 * sets itself (its own `content-type` stays).
 */
export type CloudFrontOnRefused = (
  request: CloudFrontRequest,
  verdict: Verdict,
) => CloudFrontResultResponse | Promise<CloudFrontResultResponse>;

export type ViewerRequestHandler = ((
  event: CloudFrontRequestEvent,
) => Promise<CloudFrontRequest | CloudFrontResultResponse>) & { readonly limiter: Limiter };

function viewerRequestShape() {
  return {
    ...GUARD_OPTIONS,
    policy: required(POLICY),
    store: required(STORE),
    clock: "function",
    passes: "object",
    allowlists: "array",
    denylists: "array",
    metrics: [false, fields(EMF_OPTIONS)],
    onDecision: "function",
    overrides: [false, "object"],
    env: "object",
    readFile: "function",
  } satisfies OptionsShape<ViewerRequestOptions>;
}

const STATUS_TEXT: Record<number, string> = {
  200: "OK",
  302: "Found",
  303: "See Other",
  400: "Bad Request",
  403: "Forbidden",
  429: "Too Many Requests",
  503: "Service Unavailable",
};

/**
 * Lambda@Edge viewer-request handler: counts the request and either forwards it (with the
 * remaining count for the origin and the rate-limit headers for the viewer-response step) or
 * answers it at the edge with 429, 302 (challenge) or 503 in CloudFront's result format.
 */
export function createViewerRequestHandler(options: ViewerRequestOptions): ViewerRequestHandler {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions("createViewerRequestHandler", options, viewerRequestShape());
  const record =
    options.metrics === false ? undefined : emfRecorder(options.policy, options.metrics);
  const onDecision = options.onDecision;
  const limiter = createLimiter({
    policy: options.policy,
    store: options.store,
    clock: options.clock,
    passes: options.passes ?? options.challenge?.passes,
    allowlists: options.allowlists,
    denylists: options.denylists,
    env: options.env,
    readFile: options.readFile,
    // None unless asked for: each instance's reads cost DynamoDB requests (docs/overrides.md).
    overrides: options.overrides ?? false,
    onDecision:
      record === undefined && onDecision === undefined
        ? undefined
        : (verdict, request) => {
            record?.(verdict);
            onDecision?.(verdict, request);
          },
  });
  const guard = new Guard("createViewerRequestHandler", limiter, options, CLOUDFRONT_REQUESTS);

  const handler = async (event: CloudFrontRequestEvent) => {
    const request = (event.Records[0] as CloudFrontRequestEvent["Records"][number]).cf.request;
    // The handover to the viewer-response step is ours alone, whatever the guard decides.
    delete request.headers[HANDOVER_HEADER];
    return translate(request, await guard.run(request, undefined));
  };
  return Object.assign(handler, { limiter });
}

/** How the guard reads a CloudFront request (no context) and answers through `onRefused`. */
const CLOUDFRONT_REQUESTS: GuardTranslation<
  CloudFrontRequest,
  undefined,
  CloudFrontOnRefused,
  CloudFrontResultResponse
> = {
  describe,
  webRequest: toWebRequest,
  refused: async (onRefused, request, _context, verdict) =>
    withHeaders(await onRefused(request, verdict), verdict.headers),
};

/** The guard's action as CloudFront's answer: the request passed on, or a response. */
async function translate(
  request: CloudFrontRequest,
  action: GuardAction<CloudFrontResultResponse>,
): Promise<CloudFrontRequest | CloudFrontResultResponse> {
  switch (action.kind) {
    case "page":
      return fromWebResponse(action.response);
    case "refuse":
      return refusal(action.verdict);
    case "answered":
      return action.answer;
    case "forward": {
      delete request.headers[action.remove];
      for (const name in action.set) setHeader(request.headers, name, action.set[name] as string);
      if (Object.keys(action.respond).length > 0) {
        setHeader(request.headers, HANDOVER_HEADER, JSON.stringify(action.respond));
      }
      return request;
    }
  }
}

/** Adds the verdict's headers to an answer of `onRefused`, under its own: they win. */
function withHeaders(
  answer: CloudFrontResultResponse,
  headers: Readonly<Record<string, string>>,
): CloudFrontResultResponse {
  const merged: CloudFrontHeaders = { ...answer.headers };
  const own = new Set(Object.keys(merged).map((name) => name.toLowerCase()));
  for (const name in headers) {
    if (!own.has(name.toLowerCase())) setHeader(merged, name, headers[name] as string);
  }
  return { ...answer, headers: merged };
}

/**
 * CloudFront's `clientIp` is the viewer's address as CloudFront saw the connection: it is the
 * socket peer here. `X-Forwarded-For` arrives as the viewer wrote it, so it is not passed on.
 * Header names in the event are lower case.
 */
function describe(request: CloudFrontRequest): RequestDescription {
  return {
    ip: request.clientIp,
    lowerCaseHeaders: true,
    method: request.method,
    path: request.querystring ? `${request.uri}?${request.querystring}` : request.uri,
    headers: flatten(request.headers),
  };
}

function flatten(headers: CloudFrontHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const name in headers) {
    if (name === "x-forwarded-for") continue;
    const values = headers[name];
    if (values === undefined || values.length === 0) continue;
    flat[name] =
      values.length === 1
        ? (values[0]?.value ?? "")
        : values.map((entry) => entry.value).join(", ");
  }
  return flat;
}

interface CloudFrontBody {
  readonly data?: string;
  readonly encoding?: "base64" | "text";
}

function toWebRequest(request: CloudFrontRequest): Request {
  const host = request.headers.host?.[0]?.value ?? "localhost";
  const url = `https://${host}${request.uri}${request.querystring ? `?${request.querystring}` : ""}`;
  const headers = new Headers();
  for (const name in request.headers) {
    for (const entry of request.headers[name] ?? []) headers.append(name, entry.value);
  }
  const body = request.body as CloudFrontBody | undefined;
  const method = request.method.toUpperCase();
  const hasBody = method !== "GET" && method !== "HEAD" && body?.data !== undefined;
  return new Request(url, {
    method,
    headers,
    body: hasBody
      ? Buffer.from(body?.data ?? "", body?.encoding === "base64" ? "base64" : "utf8")
      : undefined,
  });
}

async function fromWebResponse(response: Response): Promise<CloudFrontResultResponse> {
  const headers: CloudFrontHeaders = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie") setHeader(headers, name, value);
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0)
    headers["set-cookie"] = cookies.map((value) => ({ key: "Set-Cookie", value }));
  const result: CloudFrontResultResponse = {
    status: String(response.status),
    statusDescription: STATUS_TEXT[response.status] ?? (response.statusText || "OK"),
    headers,
  };
  const text = await response.text();
  if (text !== "") result.body = text;
  return result;
}

function refusal(verdict: Verdict): CloudFrontResultResponse {
  const response: CloudFrontResultResponse = {
    status: String(verdict.status),
    statusDescription: STATUS_TEXT[verdict.status] ?? "Error",
    headers: toCloudFrontHeaders(verdict.headers),
  };
  if (verdict.body !== undefined) response.body = verdict.body;
  return response;
}
