import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { type Logger, pino } from "pino";
import { createGateway, type Gateway, type GatewayOptions } from "../../src/gateway/server.js";
import { loadPolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";

export interface TestServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** An origin on a free loopback port. */
export async function startOrigin(handler: RequestListener): Promise<TestServer> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A pino logger whose JSON lines land in `lines`, for asserting on the decision log. */
export function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { logger: pino({ base: undefined }, sink), lines };
}

/** A port that nothing listens on (bound, read, released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export const TEST_SECRET = "gateway-test-secret-0123456789abcdef";

/**
 * A gateway as the tests run it: the seed's policy, a fresh memory store, loopback on free
 * ports, a log that goes nowhere; `overrides` for what a test is about.
 */
export function testGateway(upstream: string, overrides: Partial<GatewayOptions> = {}): Gateway {
  return createGateway({
    policy: loadPolicy("examples/policies/cloudfront.yaml"),
    store: memoryStore(),
    upstream,
    port: 0,
    host: "127.0.0.1",
    adminPort: 0,
    env: { EDGELIMIT_JWT_SECRET: TEST_SECRET },
    logger: capturingLogger().logger,
    ...overrides,
  });
}
