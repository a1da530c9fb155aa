import type { SecretContext } from "../../core/identity.js";
import { type AddressList, createLimiter, type Limiter } from "../../core/limiter.js";
import type { PassVerifier, RequestDescription, Store, Verdict } from "../../core/types.js";
import type { ResolvedPolicy } from "../../policy/types.js";
import {
  type CloudFrontHeaders,
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResultResponse,
  HANDOVER_HEADER,
  setHeader,
  toCloudFrontHeaders,
} from "./events.js";
import { type EmfOptions, emfRecorder } from "./metrics.js";

export interface ViewerRequestOptions extends SecretContext {
  readonly policy: ResolvedPolicy;
  readonly store: Store;
  readonly clock?: () => number;
  readonly passes?: PassVerifier;
  /** Refreshing allowlist sources (S3 JSON, a DynamoDB item), consulted after the policy's own. */
  readonly allowlists?: readonly AddressList[];
  readonly denylists?: readonly AddressList[];
  /** CloudWatch EMF lines per decision (default on); `false` turns them off. */
  readonly metrics?: false | EmfOptions;
  readonly onDecision?: (verdict: Verdict, request: RequestDescription) => void;
}

export type ViewerRequestHandler = ((
  event: CloudFrontRequestEvent,
) => Promise<CloudFrontRequest | CloudFrontResultResponse>) & { readonly limiter: Limiter };

const STATUS_TEXT: Record<number, string> = {
  302: "Found",
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
  const record =
    options.metrics === false ? undefined : emfRecorder(options.policy, options.metrics);
  const onDecision = options.onDecision;
  const limiter = createLimiter({
    policy: options.policy,
    store: options.store,
    clock: options.clock,
    passes: options.passes,
    allowlists: options.allowlists,
    denylists: options.denylists,
    env: options.env,
    readFile: options.readFile,
    onDecision:
      record === undefined && onDecision === undefined
        ? undefined
        : (verdict, request) => {
            record?.(verdict);
            onDecision?.(verdict, request);
          },
  });
  const originHeader = options.policy.headers.origin.toLowerCase();

  const handler = async (event: CloudFrontRequestEvent) => {
    const request = (event.Records[0] as CloudFrontRequestEvent["Records"][number]).cf.request;
    // Whatever the client wrote in the headers we own must not reach the origin or the response.
    delete request.headers[HANDOVER_HEADER];
    delete request.headers[originHeader];
    const verdict = await limiter.check(describe(request));
    if (verdict.action !== "allow") return refusal(verdict);
    for (const name in verdict.originHeaders) {
      setHeader(request.headers, name, verdict.originHeaders[name] as string);
    }
    if (Object.keys(verdict.headers).length > 0) {
      setHeader(request.headers, HANDOVER_HEADER, JSON.stringify(verdict.headers));
    }
    return request;
  };
  return Object.assign(handler, { limiter });
}

/**
 * CloudFront's `clientIp` is the viewer's address as CloudFront saw the connection: it is the
 * socket peer here. `X-Forwarded-For` arrives as the viewer wrote it, so it is not passed on.
 */
function describe(request: CloudFrontRequest): RequestDescription {
  return {
    ip: request.clientIp,
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

function refusal(verdict: Verdict): CloudFrontResultResponse {
  const response: CloudFrontResultResponse = {
    status: String(verdict.status),
    statusDescription: STATUS_TEXT[verdict.status] ?? "Error",
    headers: toCloudFrontHeaders(verdict.headers),
  };
  if (verdict.body !== undefined) response.body = verdict.body;
  return response;
}
