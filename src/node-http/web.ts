/**
 * Node's request and response as the Web's `Request` and `Response`: for the Web-standard
 * handlers (the challenge page) that the Node middleware, the gateway and the rate limit
 * service all mount.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";

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
