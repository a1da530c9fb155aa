/**
 * `edgelimit/node`: the limiter for Express and `node:http`. It translates an
 * `IncomingMessage` into the core's request description and a verdict into the response;
 * nothing else.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { Limiter } from "../core/limiter.js";
import { matchesPrefix, normalizePath } from "../core/path.js";
import type { ChallengeHandler, RequestDescription, Verdict } from "../core/types.js";

export interface NodeRateLimitOptions {
  readonly limiter: Limiter;
  /** Serves the challenge page under its path when the policy challenges. */
  readonly challenge?: ChallengeHandler;
}

/** Describes a Node request for the core. The address is the socket peer's, never a header. */
export function describeNodeRequest(request: IncomingMessage): RequestDescription {
  const url = (request as IncomingMessage & { originalUrl?: string }).originalUrl ?? request.url;
  return {
    ip: request.socket.remoteAddress,
    method: request.method,
    path: url ?? "/",
    headers: request.headers,
  };
}

/** Writes a refused verdict (429, 302, 503, 403) as the response. */
export function sendRefusal(response: ServerResponse, verdict: Verdict): void {
  response.writeHead(verdict.status, verdict.headers);
  response.end(verdict.body);
}

/**
 * Decides one request. Returns true when it may go on (the rate-limit headers are set on the
 * response and the remaining count on the request), false when the response was already sent.
 */
export async function guardNodeRequest(
  options: NodeRateLimitOptions,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<boolean> {
  const { limiter, challenge } = options;
  const description = describeNodeRequest(request);
  if (challenge !== undefined && matchesPrefix(normalizePath(description.path), challenge.path)) {
    const subject = await limiter.subjectOf(description);
    const answer = await challenge.handle(toWebRequest(request), { ip: description.ip, subject });
    await writeWebResponse(response, answer);
    return false;
  }
  const verdict = await limiter.check(description);
  if (verdict.action !== "allow") {
    sendRefusal(response, verdict);
    return false;
  }
  // The client may have sent a header of the same name: the origin must only see ours.
  delete request.headers[limiter.policy.headers.origin];
  for (const [name, value] of Object.entries(verdict.originHeaders)) request.headers[name] = value;
  for (const [name, value] of Object.entries(verdict.headers)) response.setHeader(name, value);
  return true;
}

/**
 * Express middleware (`app.use(nodeRateLimit({ limiter }))`), also usable with `node:http`:
 * `createServer((req, res) => guard(req, res, () => handler(req, res)))`.
 */
export function nodeRateLimit(options: NodeRateLimitOptions) {
  return (
    request: IncomingMessage,
    response: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    guardNodeRequest(options, request, response).then(
      (proceed) => {
        if (proceed) next();
      },
      (error: unknown) => next(error),
    );
  };
}

/** A Web `Request` for a Node request (used to mount Web-standard handlers such as the challenge). */
export function toWebRequest(request: IncomingMessage): Request {
  let url: URL;
  try {
    url = new URL(request.url ?? "/", `http://${request.headers.host ?? "localhost"}`);
  } catch {
    // A Host header that is not a host name must not break the page.
    url = new URL(request.url ?? "/", "http://localhost");
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const method = request.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(request) as ReadableStream<Uint8Array>) : undefined,
    // Required by undici when the body is a stream.
    ...(hasBody ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** Writes a Web `Response` to a Node response, streaming its body. */
export async function writeWebResponse(response: ServerResponse, answer: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  answer.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    headers[name] = value;
  });
  const cookies = answer.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  response.writeHead(answer.status, headers);
  if (answer.body === null) {
    response.end();
    return;
  }
  const reader = answer.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!response.write(value)) await new Promise((resolve) => response.once("drain", resolve));
  }
  response.end();
}
