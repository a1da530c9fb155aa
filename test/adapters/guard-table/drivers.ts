/**
 * Every adapter of the guard table, each started with one row's options in front of an origin
 * that reports the remaining count it was given. A driver only sets its runtime up and sends
 * requests as its clients would; the table says what must happen.
 *
 * Clients: Node servers (Express, Fastify, node:http, fetch and Hono on @hono/node-server, the
 * gateway) listen on 127.0.0.1, on ::1 and on a Unix socket, whose peer has no address; the
 * edge runtimes (Lambda@Edge events, the Worker and Hono in workerd) are told the address as
 * their platform tells it (`clientIp`, `CF-Connecting-IP`), so their IPv6 clients can be two
 * addresses of one /64.
 */
import { mkdtempSync, rmSync } from "node:fs";
import {
  createServer,
  type IncomingHttpHeaders,
  type RequestListener,
  request,
  type Server,
} from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { getRequestListener } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { Miniflare } from "miniflare";
import { pino } from "pino";
import { bundleWorker } from "../../../scripts/build-cloudflare.js";
import { honoRateLimit, withRateLimit } from "../../../src/adapters/fetch.js";
import {
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResultResponse,
  createViewerRequestHandler,
  createViewerResponseHandler,
  toCloudFrontHeaders,
} from "../../../src/adapters/lambda-edge/index.js";
import { fastifyRateLimit, nodeRateLimit } from "../../../src/adapters/node.js";
import { createChallenge } from "../../../src/challenge/index.js";
import type { ResolvedPolicy } from "../../../src/core/model.js";
import type { ChallengeHandler } from "../../../src/core/types.js";
import { createGateway, type Gateway } from "../../../src/gateway/server.js";
import { createLimiter } from "../../../src/limiter.js";
import type { PolicyInput } from "../../../src/policy/schema.js";
import { memoryStore } from "../../../src/stores/memory.js";
import {
  CHALLENGE_SECRET,
  neutralOptions,
  ORIGIN_HEADER,
  originBody,
  originResponse,
  SETUP_PATH,
  type Setup,
  webOptions,
} from "./setup.js";

/** Where a request comes from: two IPv6 neighbours share a /64; `none` has no address. */
export type From = "ipv4" | "ipv6" | "ipv6-neighbour" | "none";

export interface Sent {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

export interface SendOptions {
  readonly from?: From;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface Running {
  send(path: string, options?: SendOptions): Promise<Sent>;
  close(): Promise<void>;
}

export interface Driver {
  readonly name: string;
  /** The subject each client is counted as (keys escape the IPv6 colons). */
  readonly subjects: Readonly<Record<From, string>>;
  /** Why this runtime never sees a request without an address, when it never does. */
  readonly alwaysHasAddress?: string;
  /**
   * How the framework routes letter case by default, where the adapter knows the framework
   * (Express: not exactly; Fastify, Hono: exactly); absent, it is not known.
   */
  readonly caseSensitiveRouting?: boolean;
  /** How the policy reads the client address here (default: the socket peer). */
  readonly ip?: NonNullable<PolicyInput["identity"]>["ip"];
  /** Once per file, before any row (bundles a Worker). */
  prepare?(): Promise<void>;
  dispose?(): Promise<void>;
  /** The adapter with the row's options; rejects as the adapter refuses them. */
  start(policy: ResolvedPolicy, setup: Setup): Promise<Running>;
}

const env = { EDGELIMIT_CHALLENGE_SECRET: CHALLENGE_SECRET };
const REQUEST_TIMEOUT_MS = 10_000;

function challengeOf(policy: ResolvedPolicy, setup: Setup): ChallengeHandler | undefined {
  return setup.challenge === true ? createChallenge(policy, { env }) : undefined;
}

/** The limiter a Node adapter takes (memory store), and the row's challenge page if any. */
function limited(policy: ResolvedPolicy, setup: Setup) {
  const challenge = challengeOf(policy, setup);
  return {
    challenge,
    limiter: createLimiter({ policy, store: memoryStore(), passes: challenge?.passes }),
  };
}

// ---------------------------------------------------------------------------------------------
// Node servers

const NODE_SUBJECTS: Record<From, string> = {
  ipv4: "ip:127.0.0.1",
  ipv6: "ip:%3A%3A/64",
  "ipv6-neighbour": "ip:%3A%3A/64",
  none: "ip:unknown",
};

type Target = { readonly host: string; readonly port: number } | { readonly socketPath: string };

/** One request through a real socket, as a client sends it. */
function send(target: Target, path: string, headers: Readonly<Record<string, string>>) {
  return new Promise<Sent>((resolve, reject) => {
    const outgoing = request({ ...target, path, headers, agent: false }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
      incoming.on("error", reject);
      incoming.on("end", () =>
        resolve({
          status: incoming.statusCode ?? 0,
          headers: headersOf(incoming.headers),
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
    });
    outgoing.setTimeout(REQUEST_TIMEOUT_MS, () => outgoing.destroy(new Error("no answer")));
    outgoing.on("error", reject);
    outgoing.end();
  });
}

function headersOf(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

function listen(server: Server, ...where: [number, string] | [string]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(...(where as [number, string]), () => resolve());
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A request listener on 127.0.0.1, ::1 and a Unix socket. */
async function onLoopback(listener: RequestListener): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-guard-"));
  const socketPath = join(dir, "server.sock");
  const v4 = createServer(listener);
  const v6 = createServer(listener);
  const unix = createServer(listener);
  await listen(v4, 0, "127.0.0.1");
  await listen(v6, 0, "::1");
  await listen(unix, socketPath);
  const targets: Record<From, Target> = {
    ipv4: { host: "127.0.0.1", port: (v4.address() as AddressInfo).port },
    ipv6: { host: "::1", port: (v6.address() as AddressInfo).port },
    "ipv6-neighbour": { host: "::1", port: (v6.address() as AddressInfo).port },
    none: { socketPath },
  };
  return {
    send: (path, options = {}) =>
      send(targets[options.from ?? "ipv4"], path, options.headers ?? {}),
    async close() {
      await Promise.all([v4, v6, unix].map(closeServer));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The row's options as functions of a Node request. */
function nodeOptions(setup: Setup) {
  const { skip, cost, user, refusal } = neutralOptions(setup);
  return {
    ...(skip === undefined
      ? {}
      : { skip: (incoming: { url?: string | undefined }) => skip(incoming.url ?? "/") }),
    ...(cost === undefined
      ? {}
      : { cost: (incoming: { url?: string | undefined }) => cost(incoming.url ?? "/") }),
    ...(user === undefined
      ? {}
      : {
          user: (incoming: { headers: IncomingHttpHeaders }) => user(incoming.headers.cookie),
        }),
    ...(refusal === undefined
      ? {}
      : {
          onRefused: (
            _incoming: unknown,
            response: import("node:http").ServerResponse,
            verdict: Parameters<typeof refusal>[0],
          ) => {
            const { status, body, headers } = refusal(verdict);
            response.writeHead(status, headers).end(body);
          },
        }),
  };
}

function nodeOrigin(headers: IncomingHttpHeaders): string {
  return originBody(headers[ORIGIN_HEADER] as string | undefined);
}

const expressDriver: Driver = {
  name: "Express",
  subjects: NODE_SUBJECTS,
  caseSensitiveRouting: false,
  async start(policy, setup) {
    const { limiter, challenge } = limited(policy, setup);
    const app = express();
    app.use(nodeRateLimit({ limiter, challenge, ...nodeOptions(setup) }));
    app.all("/{*path}", (incoming, response) => {
      response.type("application/json").send(nodeOrigin(incoming.headers));
    });
    return onLoopback(app);
  },
};

const fastifyDriver: Driver = {
  name: "Fastify",
  subjects: NODE_SUBJECTS,
  caseSensitiveRouting: true,
  async start(policy, setup) {
    const { limiter, challenge } = limited(policy, setup);
    let listener: RequestListener | undefined;
    // Fastify's own server is never started: its handler is mounted on the table's listeners.
    const app = Fastify({
      serverFactory: (handler) => {
        listener = handler;
        return createServer(handler);
      },
    });
    app.addHook("onRequest", fastifyRateLimit({ limiter, challenge, ...nodeOptions(setup) }));
    app.all("/*", async (incoming, reply) => {
      reply.type("application/json");
      return nodeOrigin(incoming.headers);
    });
    await app.ready();
    const running = await onLoopback(listener as RequestListener);
    return {
      send: running.send,
      close: async () => {
        await running.close();
        await app.close();
      },
    };
  },
};

const nodeHttpDriver: Driver = {
  name: "node:http",
  subjects: NODE_SUBJECTS,
  async start(policy, setup) {
    const { limiter, challenge } = limited(policy, setup);
    // The middleware's node:http form: `guard(req, res, next)`.
    const guard = nodeRateLimit({ limiter, challenge, ...nodeOptions(setup) });
    return onLoopback((incoming, response) =>
      guard(incoming, response, (error) => {
        response.setHeader("content-type", "application/json");
        if (error === undefined) response.end(nodeOrigin(incoming.headers));
        else response.writeHead(500).end(String(error));
      }),
    );
  },
};

const fetchDriver: Driver = {
  name: "fetch (withRateLimit)",
  subjects: NODE_SUBJECTS,
  async start(policy, setup) {
    const { limiter, challenge } = limited(policy, setup);
    const handler = withRateLimit<{ incoming: import("node:http").IncomingMessage }>(
      (forwarded) => originResponse(forwarded),
      {
        limiter,
        challenge,
        // The peer as the runtime reports it (here @hono/node-server's incoming message).
        ip: (_request, context) => context.incoming.socket.remoteAddress,
        ...webOptions(setup),
      },
    );
    return onLoopback(
      getRequestListener((incoming, context) => handler(incoming, context as never)),
    );
  },
};

const honoNodeDriver: Driver = {
  name: "Hono on Node",
  subjects: NODE_SUBJECTS,
  caseSensitiveRouting: true,
  async start(policy, setup) {
    const { limiter, challenge } = limited(policy, setup);
    const app = new Hono();
    app.use(honoRateLimit({ limiter, challenge, ...webOptions(setup) }));
    app.all("*", (c) => originResponse(c.req.raw));
    return onLoopback(getRequestListener(app.fetch));
  },
};

const gatewayDriver: Driver = {
  name: "gateway",
  subjects: NODE_SUBJECTS,
  alwaysHasAddress: "the gateway listens on TCP only, where every peer has an address",
  async start(policy, setup) {
    const origin = createServer((incoming, response) => {
      response.setHeader("content-type", "application/json");
      response.end(nodeOrigin(incoming.headers));
    });
    await listen(origin, 0, "127.0.0.1");
    const upstream = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    // One store behind a gateway on each loopback address: one count, as one gateway keeps.
    const store = memoryStore();
    const gateways: Gateway[] = [];
    try {
      for (const host of ["127.0.0.1", "::1"]) {
        const challenge = challengeOf(policy, setup);
        const gateway = createGateway({
          policy,
          store,
          upstream,
          host,
          port: 0,
          adminPort: false,
          challenge,
          logger: pino({ level: "silent" }),
          ...nodeOptions(setup),
        });
        gateways.push(gateway);
        await gateway.start();
      }
    } catch (error) {
      await Promise.all(gateways.map((gateway) => gateway.close()));
      await closeServer(origin);
      throw error;
    }
    const [v4, v6] = gateways as [Gateway, Gateway];
    const targets: Record<Exclude<From, "none">, Target> = {
      ipv4: { host: "127.0.0.1", port: v4.port as number },
      ipv6: { host: "::1", port: v6.port as number },
      "ipv6-neighbour": { host: "::1", port: v6.port as number },
    };
    return {
      send(path, options = {}) {
        const from = options.from ?? "ipv4";
        if (from === "none") throw new Error("the gateway has no client without an address");
        return send(targets[from], path, options.headers ?? {});
      },
      async close() {
        await Promise.all(gateways.map((gateway) => gateway.close()));
        await closeServer(origin);
      },
    };
  },
};

// ---------------------------------------------------------------------------------------------
// Edge runtimes

const EDGE_ADDRESSES: Record<From, string | undefined> = {
  ipv4: "203.0.113.7",
  ipv6: "2001:db8:1:2::10",
  "ipv6-neighbour": "2001:db8:1:2::20",
  none: undefined,
};

const EDGE_SUBJECTS: Record<From, string> = {
  ipv4: "ip:203.0.113.7",
  ipv6: "ip:2001%3Adb8%3A1%3A2%3A%3A/64",
  "ipv6-neighbour": "ip:2001%3Adb8%3A1%3A2%3A%3A/64",
  none: "ip:unknown",
};

function cloudFrontHeaders(
  headers: Readonly<Record<string, string>>,
): CloudFrontRequest["headers"] {
  const result: CloudFrontRequest["headers"] = {
    host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }],
  };
  for (const [name, value] of Object.entries(headers)) {
    result[name.toLowerCase()] = [{ key: name, value }];
  }
  return result;
}

function fromCloudFront(headers: CloudFrontRequest["headers"] | undefined): Headers {
  const result = new Headers();
  for (const [name, values] of Object.entries(headers ?? {})) {
    for (const { value } of values) result.append(name, value);
  }
  return result;
}

/**
 * Lambda@Edge as CloudFront runs it: the viewer-request handler on the event, then, for a
 * request it passes on, the origin (which reads the forwarded request) and the viewer-response
 * handler on the origin's answer.
 */
const lambdaEdgeDriver: Driver = {
  name: "Lambda@Edge",
  subjects: EDGE_SUBJECTS,
  async start(policy, setup) {
    const { skip, cost, user, refusal } = neutralOptions(setup);
    const uriOf = (viewer: CloudFrontRequest) =>
      viewer.querystring === "" ? viewer.uri : `${viewer.uri}?${viewer.querystring}`;
    const viewerRequest = createViewerRequestHandler({
      policy,
      store: memoryStore(),
      metrics: false,
      challenge: challengeOf(policy, setup),
      ...(skip === undefined ? {} : { skip: (viewer) => skip(uriOf(viewer)) }),
      ...(cost === undefined ? {} : { cost: (viewer) => cost(uriOf(viewer)) }),
      ...(user === undefined ? {} : { user: (viewer) => user(viewer.headers.cookie?.[0]?.value) }),
      ...(refusal === undefined
        ? {}
        : {
            onRefused: (_viewer, verdict): CloudFrontResultResponse => {
              const { status, body, headers } = refusal(verdict);
              return { status: String(status), body, headers: toCloudFrontHeaders(headers) };
            },
          }),
    });
    const viewerResponse = createViewerResponseHandler();
    return {
      async send(path, options = {}) {
        const [uri, querystring = ""] = path.split("?") as [string, string?];
        const address = EDGE_ADDRESSES[options.from ?? "ipv4"];
        const viewer = {
          ...(address === undefined ? {} : { clientIp: address }),
          method: "GET",
          uri,
          querystring,
          headers: cloudFrontHeaders(options.headers ?? {}),
        } as CloudFrontRequest;
        const event: CloudFrontRequestEvent = {
          Records: [{ cf: { config: { eventType: "viewer-request" }, request: viewer } }],
        };
        const result = await viewerRequest(event);
        if (!("uri" in result)) {
          const answer = result as CloudFrontResultResponse;
          return {
            status: Number(answer.status),
            headers: fromCloudFront(answer.headers),
            body: answer.body ?? "",
          };
        }
        const forwarded = result as CloudFrontRequest;
        const body = originBody(forwarded.headers[ORIGIN_HEADER]?.[0]?.value);
        const answered = await viewerResponse({
          Records: [
            {
              cf: {
                config: { eventType: "viewer-response" },
                request: forwarded,
                response: { status: "200", headers: {} },
              },
            },
          ],
        });
        return { status: Number(answered.status), headers: fromCloudFront(answered.headers), body };
      },
      close: async () => {},
    };
  },
};

/** A Worker bundled once per file and run in workerd, one fresh runtime per row. */
function workerdDriver(
  name: string,
  entry: string,
  runtime: { readonly durableObjects: boolean; readonly caseSensitiveRouting?: boolean },
  ip?: Driver["ip"],
): Driver {
  let dir: string | undefined;
  let script: string | undefined;
  return {
    name,
    subjects: EDGE_SUBJECTS,
    ...(runtime.caseSensitiveRouting === undefined
      ? {}
      : { caseSensitiveRouting: runtime.caseSensitiveRouting }),
    ...(ip === undefined ? {} : { ip }),
    async prepare() {
      dir = mkdtempSync(join(tmpdir(), "edgelimit-guard-worker-"));
      script = join(dir, "worker.js");
      await bundleWorker(entry, script);
    },
    async dispose() {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
    async start(policy, setup) {
      const miniflare = new Miniflare({
        modules: true,
        scriptPath: script as string,
        modulesRoot: dir as string,
        compatibilityDate: "2025-06-01",
        bindings: {
          EDGELIMIT_SETUP: JSON.stringify({ policy, setup }),
          EDGELIMIT_CHALLENGE_SECRET: CHALLENGE_SECRET,
        },
        ...(runtime.durableObjects
          ? { durableObjects: { EDGELIMIT_COUNTER: { className: "EdgelimitCounter" } } }
          : {}),
      });
      await miniflare.ready;
      const running: Running = {
        async send(path, options = {}) {
          // Miniflare writes CF-Connecting-IP itself on a request without one, or with an empty
          // one (127.0.0.1), so a client without an address says "unknown" there, as some
          // proxies write.
          const headers: Record<string, string> = {
            ...options.headers,
            "cf-connecting-ip": EDGE_ADDRESSES[options.from ?? "ipv4"] ?? "unknown",
          };
          const response = await miniflare.dispatchFetch(`https://example.test${path}`, {
            headers,
            redirect: "manual",
          });
          return {
            status: response.status,
            headers: response.headers as unknown as Headers,
            body: await response.text(),
          };
        },
        close: () => miniflare.dispose(),
      };
      // A Worker builds its handler on its first request (see the fixtures): this one, which
      // reaches no limiter, says whether the adapter refused its options.
      const probe = await running.send(SETUP_PATH);
      if (probe.status !== 204) {
        await running.close();
        throw new Error(probe.body.replace(/^setup failed: /, ""));
      }
      return running;
    },
  };
}

export const DRIVERS: readonly Driver[] = [
  expressDriver,
  fastifyDriver,
  nodeHttpDriver,
  fetchDriver,
  honoNodeDriver,
  gatewayDriver,
  lambdaEdgeDriver,
  workerdDriver("Hono in workerd", fileURLToPath(new URL("./hono-worker.ts", import.meta.url)), {
    durableObjects: false,
    caseSensitiveRouting: true,
  }),
  workerdDriver(
    "the Worker (createCloudflareHandler)",
    fileURLToPath(new URL("./cloudflare-worker.ts", import.meta.url)),
    { durableObjects: true },
    { source: "header", header: "cf-connecting-ip" },
  ),
];
