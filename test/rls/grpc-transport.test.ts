import { type ClientHttp2Session, connect } from "node:http2";
import { deflateSync, gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RlsAnswer } from "../../src/rls/answer.js";
import { type GrpcListener, SHOULD_RATE_LIMIT, startGrpc } from "../../src/rls/grpc.js";
import { CODE, type RateLimitRequest, SERVING_STATUS } from "../../src/rls/messages.js";
import { encodeRequest } from "./raw-grpc.js";

/**
 * The gRPC listener's transport (grpc.ts on node:http2) as the clients a rate limit service
 * meets use it: @grpc/grpc-js (compression, keepalive pings, deadlines, methods it does not
 * serve) and plain HTTP/2 writing what Envoy writes (`grpc-timeout`, GOAWAY on shutdown). The
 * decisions are a stand-in that answers at once, or after `slow-<ms>` milliseconds for a call
 * whose domain says so; test/rls/grpc.test.ts runs the real service through two client stacks.
 */

const OK_ANSWER: RlsAnswer = {
  response: {
    overallCode: CODE.OK,
    statuses: [],
    responseHeadersToAdd: [],
    requestHeadersToAdd: [],
  },
  unavailable: undefined,
  record: {
    action: "allow",
    reason: "within-limit",
    rule: undefined,
    tier: "anonymous",
    subject: "test",
    durationMs: 0,
    shadowed: [],
  },
};

const peers: (string | undefined)[] = [];
const outcomes: string[] = [];

function decide(
  request: RateLimitRequest,
  peer: string | undefined,
): RlsAnswer | Promise<RlsAnswer> {
  peers.push(peer);
  const slow = /^slow-(\d+)$/.exec(request.domain);
  if (slow === null) return OK_ANSWER;
  return new Promise((resolve) => setTimeout(() => resolve(OK_ANSWER), Number(slow[1])));
}

async function listen(): Promise<GrpcListener> {
  return startGrpc(
    {
      shouldRateLimit: decide,
      health: () => SERVING_STATUS.SERVING,
      maxDescriptors: 64,
      onCall: (method, code) => outcomes.push(`${method} ${code}`),
    },
    "127.0.0.1",
    0,
  );
}

const call = (domain: string) => Buffer.from(encodeRequest(domain, [[["k", Buffer.from("v")]]]));

type Unary = (
  message: Buffer,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: Buffer) => void,
) => void;

/** A grpc-js client of `path` that sends and reads raw bytes, with the channel's `options`. */
function grpcJs(port: number, path: string, options: grpc.ChannelOptions = {}) {
  const bytes = (value: Buffer) => value;
  const Client = grpc.makeGenericClientConstructor(
    {
      Call: {
        path,
        requestStream: false,
        responseStream: false,
        requestSerialize: bytes,
        requestDeserialize: bytes,
        responseSerialize: bytes,
        responseDeserialize: bytes,
      },
    },
    "Raw",
  );
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), options);
  const unary = Reflect.get(client, "Call") as Unary;
  return {
    call: (message: Buffer) =>
      new Promise<{ code: number; details?: string }>((resolve) => {
        unary.call(client, message, { deadline: Date.now() + 10_000 }, (error) =>
          resolve(error === null ? { code: 0 } : { code: error.code, details: error.details }),
        );
      }),
    close: () => client.close(),
  };
}

/** One call written as Envoy writes it; resolves with its status and the :status seen. */
function rawCall(
  session: ClientHttp2Session,
  message: Buffer,
  extra: Record<string, string> = {},
  compressed = false,
  /** Writes the frame in pieces cut at these offsets, one DATA frame each. */
  cuts: readonly number[] = [],
): Promise<{ status: number; grpcStatus: string | undefined }> {
  const frame = Buffer.alloc(5 + message.length);
  frame[0] = compressed ? 1 : 0;
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  const stream = session.request({
    ":method": "POST",
    ":path": SHOULD_RATE_LIMIT,
    "content-type": "application/grpc",
    te: "trailers",
    ...extra,
  });
  return new Promise((resolve, reject) => {
    let status = 0;
    let grpcStatus: string | undefined;
    stream.on("response", (headers) => {
      status = Number(headers[":status"]);
      grpcStatus ??= headers["grpc-status"] as string | undefined;
    });
    stream.on("trailers", (trailers) => {
      grpcStatus = trailers["grpc-status"] as string | undefined;
    });
    stream.on("data", () => undefined);
    stream.on("error", reject);
    stream.on("close", () => resolve({ status, grpcStatus }));
    let from = 0;
    for (const cut of cuts) {
      stream.write(frame.subarray(from, cut));
      from = cut;
    }
    stream.end(frame.subarray(from));
  });
}

async function session(port: number): Promise<ClientHttp2Session> {
  const opened = connect(`http://127.0.0.1:${port}`);
  await new Promise((resolve, reject) => opened.once("connect", resolve).once("error", reject));
  return opened;
}

const OK = { status: 200, grpcStatus: "0" };
let listener: GrpcListener;

beforeAll(async () => {
  listener = await listen();
});

afterAll(async () => {
  await listener?.close(1000);
});

describe("the gRPC listener on node:http2", () => {
  it("answers a compressed call from grpc-js, and its keepalive pings", async () => {
    const client = grpcJs(listener.port, SHOULD_RATE_LIMIT, {
      "grpc.default_compression_algorithm": 2,
      "grpc.keepalive_time_ms": 100,
      "grpc.keepalive_timeout_ms": 2000,
      "grpc.keepalive_permit_without_calls": 1,
    });
    expect(await client.call(call("compressed"))).toEqual({ code: 0 });
    // Idle pings for a while: a server that did not answer them would be dropped by the client.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await client.call(call("after-pings"))).toEqual({ code: 0 });
    client.close();
  });

  it("says UNIMPLEMENTED for a method it does not serve and RESOURCE_EXHAUSTED past 1 MiB", async () => {
    const other = grpcJs(listener.port, "/envoy.service.ratelimit.v3.RateLimitService/Other");
    expect((await other.call(call("edge"))).code).toBe(grpc.status.UNIMPLEMENTED);
    other.close();
    const client = grpcJs(listener.port, SHOULD_RATE_LIMIT);
    const huge = Buffer.from(encodeRequest("edge", [[["k", Buffer.alloc(1_100_000, 97)]]]));
    expect((await client.call(huge)).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    // Below the bound the same shape is decided.
    const large = Buffer.from(encodeRequest("edge", [[["k", Buffer.alloc(900_000, 97)]]]));
    expect((await client.call(large)).code).toBe(grpc.status.OK);
    client.close();
  });

  it("ends a call its decision outlives with DEADLINE_EXCEEDED, by the call's grpc-timeout", async () => {
    const client = await session(listener.port);
    const late = await rawCall(client, call("slow-3000"), { "grpc-timeout": "100m" });
    expect(late).toEqual({ status: 200, grpcStatus: String(grpc.status.DEADLINE_EXCEEDED) });
    // Without a timeout the same kind of call is waited for.
    expect(await rawCall(client, call("slow-50"))).toEqual({ status: 200, grpcStatus: "0" });
    expect(await rawCall(client, call("edge"), { "grpc-timeout": "soon" })).toEqual({
      status: 200,
      grpcStatus: String(grpc.status.INTERNAL),
    });
    client.close();
    expect(outcomes).toContain("ShouldRateLimit DEADLINE_EXCEEDED");
  });

  it("reads a message that comes in pieces, its prefix split too", async () => {
    const client = await session(listener.port);
    expect(await rawCall(client, call("pieces"), {}, false, [2, 4, 9])).toEqual(OK);
    expect(await rawCall(client, call("pieces"), {}, false, [5, 12])).toEqual(OK);
    client.close();
  });

  it("undoes gzip and deflate, and refuses an encoding it does not know", async () => {
    const client = await session(listener.port);
    const gzip = (encoding: string) => ({ "grpc-encoding": encoding });
    expect(await rawCall(client, gzipSync(call("gz")), gzip("gzip"), true)).toEqual(OK);
    expect(await rawCall(client, deflateSync(call("df")), gzip("deflate"), true)).toEqual(OK);
    expect(await rawCall(client, gzipSync(call("br")), gzip("br"), true)).toEqual({
      status: 200,
      grpcStatus: String(grpc.status.UNIMPLEMENTED),
    });
    // A bomb: 1 KiB that would inflate past the 1 MiB a message may hold.
    const bomb = gzipSync(Buffer.alloc(2 * 1024 * 1024));
    expect(await rawCall(client, bomb, gzip("gzip"), true)).toEqual({
      status: 200,
      grpcStatus: String(grpc.status.RESOURCE_EXHAUSTED),
    });
    client.close();
    expect(peers).toContain("127.0.0.1");
  });

  it("says 415 to a request that is not gRPC", async () => {
    const client = await session(listener.port);
    const stream = client.request({
      ":method": "POST",
      ":path": SHOULD_RATE_LIMIT,
      "content-type": "application/json",
    });
    stream.end("{}");
    const [headers] = await Promise.all([
      new Promise<Record<string, unknown>>((resolve) => stream.once("response", resolve)),
      new Promise((resolve) => stream.on("data", () => undefined).once("close", resolve)),
    ]);
    expect(headers[":status"]).toBe(415);
    client.close();
  });
});

describe("closing the gRPC listener", () => {
  it("sends GOAWAY, answers the call in flight, then refuses connections", async () => {
    const draining = await listen();
    const client = await session(draining.port);
    const goaway = new Promise((resolve) => client.once("goaway", resolve));
    const inFlight = rawCall(client, call("slow-300"));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const closed = draining.close(5000);
    await goaway;
    expect(await inFlight).toEqual({ status: 200, grpcStatus: "0" });
    await closed;
    await expect(session(draining.port)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });
});
