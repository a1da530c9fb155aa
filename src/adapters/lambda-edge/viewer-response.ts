import {
  type CloudFrontResponse,
  type CloudFrontResponseEvent,
  HANDOVER_HEADER,
  setHeader,
} from "./events.js";

/** Only these may be copied onto the response, whatever the handover header says. */
const DISCLOSED = new Set([
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "ratelimit",
  "ratelimit-policy",
]);
const MAX_HANDOVER_LENGTH = 2048;

/**
 * Lambda@Edge viewer-response handler: copies the rate-limit headers the viewer-request step
 * computed onto the origin's (or the cache's) response. It needs no store and no policy.
 */
export function createViewerResponseHandler(): (
  event: CloudFrontResponseEvent,
) => Promise<CloudFrontResponse> {
  return async (event) => {
    const { request, response } = (event.Records[0] as CloudFrontResponseEvent["Records"][number])
      .cf;
    const handover = request.headers[HANDOVER_HEADER]?.[0]?.value;
    if (handover === undefined || handover.length > MAX_HANDOVER_LENGTH) return response;
    let headers: unknown;
    try {
      headers = JSON.parse(handover);
    } catch {
      return response;
    }
    if (headers === null || typeof headers !== "object") return response;
    for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
      if (typeof value === "string" && DISCLOSED.has(name.toLowerCase()))
        setHeader(response.headers, name, value);
    }
    return response;
  };
}
