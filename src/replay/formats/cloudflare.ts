import { JsonLinesParser } from "./json-lines.js";
import type { LogFormat } from "./types.js";

/**
 * Cloudflare Logpush `http_requests`, one JSON object per line. `ClientRequestURI` is the path
 * with its query; `EdgeStartTimestamp` is RFC 3339 or a Unix number (seconds or nanoseconds,
 * depending on the job's `timestamp_format`), both read. `ClientIP` is the visitor's address
 * as Cloudflare's edge saw it.
 */
const FIELDS = {
  ip: "ClientIP",
  time: "EdgeStartTimestamp",
  method: "ClientRequestMethod",
  path: "ClientRequestURI",
  query: "",
  userAgent: "ClientRequestUserAgent",
  status: "EdgeResponseStatus",
} as const;

export const cloudflare: LogFormat = {
  name: "cloudflare",
  summary: "Cloudflare Logpush http_requests (JSON lines: ClientIP, ClientRequestURI, ...)",
  detect: (lines) =>
    lines.some(
      (line) =>
        line.charCodeAt(0) === 123 &&
        (line.includes('"ClientIP"') || line.includes('"EdgeStartTimestamp"')),
    ),
  create: (options) => new JsonLinesParser({ ...FIELDS, ...options.fields }, options),
};
