/**
 * The parts of CloudFront's Lambda@Edge event and result shapes that edgelimit reads and writes
 * (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/lambda-event-structure.html).
 */

/** Header names in lower case, each with its original-case `key` and value. */
export type CloudFrontHeaders = Record<string, { key?: string; value: string }[]>;

export interface CloudFrontRequest {
  clientIp: string;
  method: string;
  uri: string;
  querystring: string;
  headers: CloudFrontHeaders;
  [field: string]: unknown;
}

export interface CloudFrontResponse {
  status: string;
  statusDescription?: string;
  headers: CloudFrontHeaders;
  [field: string]: unknown;
}

/** A response generated at the edge (the viewer-request step refusing a request). */
export interface CloudFrontResultResponse {
  status: string;
  statusDescription?: string;
  headers?: CloudFrontHeaders;
  body?: string;
  bodyEncoding?: "text" | "base64";
}

export interface CloudFrontRequestEvent {
  Records: { cf: { config: Record<string, unknown>; request: CloudFrontRequest } }[];
}

export interface CloudFrontResponseEvent {
  Records: {
    cf: {
      config: Record<string, unknown>;
      request: CloudFrontRequest;
      response: CloudFrontResponse;
    };
  }[];
}

/**
 * The request header that carries the client's rate-limit headers from the viewer-request step
 * to the viewer-response step (CloudFront hands the viewer-response function the request as
 * the viewer-request function left it). A client-sent value is always removed first.
 */
export const HANDOVER_HEADER = "x-edgelimit-response-headers";

/** Canonical spellings for the headers edgelimit writes; others are title-cased. */
const SPELLING: Record<string, string> = {
  "x-ratelimit-limit": "X-RateLimit-Limit",
  "x-ratelimit-remaining": "X-RateLimit-Remaining",
  "x-ratelimit-reset": "X-RateLimit-Reset",
  ratelimit: "RateLimit",
  "ratelimit-policy": "RateLimit-Policy",
};

export function headerKey(name: string): string {
  const lower = name.toLowerCase();
  return (
    SPELLING[lower] ??
    lower.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase())
  );
}

export function setHeader(headers: CloudFrontHeaders, name: string, value: string): void {
  headers[name.toLowerCase()] = [{ key: headerKey(name), value }];
}

export function toCloudFrontHeaders(headers: Readonly<Record<string, string>>): CloudFrontHeaders {
  const result: CloudFrontHeaders = {};
  for (const name in headers) setHeader(result, name, headers[name] as string);
  return result;
}
