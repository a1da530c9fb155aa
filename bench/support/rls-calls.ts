/**
 * The calls of bench/rls.bench.ts: envoyproxy/ratelimit's configuration it runs with, each
 * of 10,000 returning clients' `ShouldRateLimit` (the client's address, and the address with
 * the path, as Envoy's route sends them), encoded once by protobufjs from Envoy's rls.proto,
 * and each one's `/check/nginx` as nginx's auth_request sends it.
 */
import { upstreamRoot } from "../../test/rls/harness.js";

export const POPULATION = 10_000;
export const PATH = "/api/search";

export const CONFIG = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 600 }
    descriptors:
      - key: path
        rate_limit: { unit: minute, requests_per_unit: 300 }
`;

/** `CONFIG` with both descriptors counted hybrid (docs/proxies.md): reserved ahead in Redis. */
export const HYBRID_CONFIG = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 600 }
    metadata: { edgelimit: { counting: hybrid } }
    descriptors:
      - key: path
        rate_limit: { unit: minute, requests_per_unit: 300 }
        metadata: { edgelimit: { counting: hybrid } }
`;

export function clientAddress(index: number): string {
  const i = index % POPULATION;
  return `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** Every client's call as a gRPC message (5-byte prefix and protobuf), ready to write. */
export function framedCalls(): Buffer[] {
  const Request = upstreamRoot().lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
  return Array.from({ length: POPULATION }, (_, index) => {
    const address = { key: "remote_address", value: clientAddress(index) };
    const message = Request.fromObject({
      domain: "edge",
      descriptors: [{ entries: [address] }, { entries: [address, { key: "path", value: PATH }] }],
    });
    const bytes = Request.encode(message).finish();
    const frame = Buffer.alloc(5 + bytes.length);
    frame.writeUInt32BE(bytes.length, 1);
    frame.set(bytes, 5);
    return frame;
  });
}

/**
 * Every client's `/check/nginx` as nginx's auth_request sends it (examples/rls/nginx.conf):
 * the original URI and method, the client's address in `X-Forwarded-For`.
 */
export function checkRequests(): Buffer[] {
  return Array.from({ length: POPULATION }, (_, index) =>
    Buffer.from(
      `GET /check/nginx HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Original-URI: ${PATH}?q=shoes\r\nX-Original-Method: GET\r\nX-Forwarded-For: ${clientAddress(index)}\r\n\r\n`,
      "latin1",
    ),
  );
}
