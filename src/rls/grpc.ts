/**
 * The gRPC listener: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
 * `grpc.health.v1.Health/Check`, served on node:http2 with gRPC's framing and trailers
 * (grpc-wire.ts) and the messages encoded by codec.ts. A call costs what the transport costs
 * and its decision, nothing a general gRPC server adds (metadata objects, interceptors, a
 * call object and its streams): docs/proxies.md, *The gRPC transport*, has the figures.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import type { AddressInfo } from "node:net";
import { EdgelimitError } from "../core/errors.js";
import type { RlsAnswer } from "./answer.js";
import {
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "./codec.js";
import {
  framed,
  PREFIX_BYTES,
  percentEncoded,
  type Refusal,
  STATUS,
  type StatusName,
  timeoutMs,
  tooLarge,
  unaryMessage,
} from "./grpc-wire.js";
import type { RateLimitRequest, ServingStatus } from "./messages.js";

export const SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
export const HEALTH_CHECK = "/grpc.health.v1.Health/Check";

/** The names `grpc.health.v1.Health/Check` answers for: the server, and the service by name. */
const HEALTH_SERVICES = new Set(["", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"]);
/** Envoy's requests are a few hundred bytes; nothing legitimate comes near this. */
const MAX_MESSAGE_BYTES = 1024 * 1024;
/**
 * What node:http2 may hold for one connection (its default is 10 MB): Envoy multiplexes every
 * call of a proxy on a few connections, and a call waiting for Redis holds its stream; past the
 * bound node refuses new streams, which Envoy would count as the service failing.
 */
const SESSION_MEMORY_MB = 64;

type Method = "ShouldRateLimit" | "Check";

export interface GrpcHandlers {
  shouldRateLimit(
    request: RateLimitRequest,
    peer: string | undefined,
  ): RlsAnswer | Promise<RlsAnswer>;
  health(): ServingStatus;
  /** Descriptors read in one call: the decoder stops at the one past it. */
  readonly maxDescriptors: number;
  /** Called after each call with its outcome (a gRPC status name), for metrics. Must not throw. */
  onCall?(method: Method, code: string): void;
}

export interface GrpcListener {
  readonly port: number;
  /**
   * Stops accepting connections, sends each connection GOAWAY (Envoy then opens a new one for
   * its next call) and lets the calls in flight finish (at most `graceMs`), then closes.
   */
  close(graceMs: number): Promise<void>;
}

export async function startGrpc(
  handlers: GrpcHandlers,
  host: string,
  port: number,
): Promise<GrpcListener> {
  const server = createServer({ maxSessionMemory: SESSION_MEMORY_MB });
  const sessions = new Set<ServerHttp2Session>();
  /** Each connection's peer, read once: the socket behind a session is reached through a proxy. */
  const peers = new WeakMap<ServerHttp2Session, string | undefined>();
  /** Set while closing: called when the last connection is gone. */
  let drained: (() => void) | undefined;
  server.on("session", (session) => {
    sessions.add(session);
    peers.set(session, session.socket?.remoteAddress);
    session.on("error", ignore);
    session.once("close", () => {
      sessions.delete(session);
      if (sessions.size === 0) drained?.();
    });
  });

  const notify = (method: Method, code: StatusName): void => {
    try {
      handlers.onCall?.(method, code);
    } catch {
      // Observers must never change an answer.
    }
  };
  const refuse = (stream: ServerHttp2Stream, method: Method, refusal: Refusal): void => {
    notify(method, refusal.status);
    trailersOnly(stream, refusal.status, refusal.details);
  };

  const decide = (
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    message: Buffer,
  ): void => {
    let request: RateLimitRequest;
    let answer: RlsAnswer | Promise<RlsAnswer>;
    try {
      request = decodeRateLimitRequest(message, handlers.maxDescriptors);
      answer = handlers.shouldRateLimit(request, peers.get(stream.session as ServerHttp2Session));
    } catch (error) {
      refuse(stream, "ShouldRateLimit", failure(error));
      return;
    }
    if (!(answer instanceof Promise)) {
      reply(stream, answer);
      return;
    }
    // Only a call that waits (for Redis) needs its deadline watched.
    const timeout = timeoutMs(headers["grpc-timeout"]);
    let expired = false;
    const timer =
      timeout === undefined
        ? undefined
        : setTimeout(() => {
            expired = true;
            if (!open(stream)) return;
            refuse(stream, "ShouldRateLimit", {
              status: "DEADLINE_EXCEEDED",
              details: "Deadline exceeded",
            });
          }, timeout);
    answer.then(
      (known) => {
        clearTimeout(timer);
        if (expired) return;
        if (open(stream)) reply(stream, known);
        else notify("ShouldRateLimit", "CANCELLED");
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (!expired && open(stream)) refuse(stream, "ShouldRateLimit", failure(error));
      },
    );
  };

  const reply = (stream: ServerHttp2Stream, answer: RlsAnswer): void => {
    if (answer.response === undefined) {
      refuse(stream, "ShouldRateLimit", {
        status: "UNAVAILABLE",
        details: `rate limit store unavailable: ${answer.unavailable?.cause ?? "failed"}`,
      });
      return;
    }
    notify("ShouldRateLimit", "OK");
    answerOk(stream, encodeRateLimitResponse(answer.response, PREFIX_BYTES));
  };

  const check = (stream: ServerHttp2Stream, message: Buffer): void => {
    let service: string;
    try {
      service = decodeHealthCheckRequest(message).service;
    } catch (error) {
      refuse(stream, "Check", failure(error));
      return;
    }
    if (!HEALTH_SERVICES.has(service)) {
      refuse(stream, "Check", { status: "NOT_FOUND", details: `unknown service "${service}"` });
      return;
    }
    notify("Check", "OK");
    answerOk(stream, encodeHealthCheckResponse(handlers.health(), PREFIX_BYTES));
  };

  server.on("stream", (stream, headers) => {
    stream.on("error", ignore);
    const path = String(headers[":path"]);
    const method: Method | undefined =
      path === SHOULD_RATE_LIMIT ? "ShouldRateLimit" : path === HEALTH_CHECK ? "Check" : undefined;
    const contentType = headers["content-type"];
    if (headers[":method"] !== "POST" || !contentType?.startsWith("application/grpc")) {
      // Not a gRPC call: as grpc-js answers it.
      stream.respond({ ":status": 415 }, { endStream: true });
      return;
    }
    if (method === undefined) {
      trailersOnly(stream, "UNIMPLEMENTED", `The server does not implement the method ${path}`);
      return;
    }
    if (Number.isNaN(timeoutMs(headers["grpc-timeout"]))) {
      refuse(stream, method, {
        status: "INTERNAL",
        details: `Invalid grpc-timeout value "${headers["grpc-timeout"]}"`,
      });
      return;
    }
    // A unary call's message most often comes in one DATA frame: kept as it came. Later
    // chunks are joined once, at the end (joining each to the rest would copy a 1 MiB message
    // dozens of times); the first is grown only until it holds the 5-byte prefix.
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    let total = 0;
    let refused = false;
    stream.on("data", (chunk: Buffer) => {
      if (refused) return;
      total += chunk.length;
      if (first === undefined) first = chunk;
      else if (first.length < PREFIX_BYTES) first = Buffer.concat([first, chunk]);
      else if (more === undefined) more = [chunk];
      else more.push(chunk);
      const over = tooLarge(first, total, MAX_MESSAGE_BYTES);
      if (over === undefined) return;
      refused = true;
      first = undefined;
      more = undefined;
      refuse(stream, method, over);
    });
    stream.on("end", () => {
      if (refused || !open(stream)) return;
      const bytes =
        first === undefined ? EMPTY : more === undefined ? first : Buffer.concat([first, ...more]);
      const message = unaryMessage(
        bytes,
        headers["grpc-encoding"] as string | undefined,
        MAX_MESSAGE_BYTES,
        path,
      );
      if ("status" in message) refuse(stream, method, message);
      else if (method === "ShouldRateLimit") decide(stream, headers, message);
      else check(stream, message);
    });
  });

  const bound = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
  return {
    port: bound,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        server.close();
        const timer = setTimeout(() => {
          for (const session of sessions) session.destroy();
          resolve();
        }, graceMs);
        drained = () => {
          clearTimeout(timer);
          resolve();
        };
        // A session the client is already closing (its own GOAWAY) ignores close(): each one's
        // "close" event, not close()'s callback, says when it is gone.
        for (const session of sessions) session.close();
        if (sessions.size === 0) drained();
      }),
  };
}

const EMPTY = Buffer.alloc(0);

function ignore(): void {}

function open(stream: ServerHttp2Stream): boolean {
  return !stream.destroyed && !stream.closed;
}

/** The message (encoded after its prefix's bytes) framed, the status in trailers. */
function answerOk(stream: ServerHttp2Stream, message: Buffer): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  // `on`, not `once`: the stream asks once, and `once` would wrap the listener for each call.
  stream.on("wantTrailers", sendOkTrailers);
  stream.end(framed(message));
}

function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers({ "grpc-status": "0" });
}

/** A call that ends without a message: the status in the response's only headers. */
function trailersOnly(stream: ServerHttp2Stream, status: StatusName, details: string): void {
  if (!open(stream) || stream.headersSent) return;
  stream.respond(
    {
      ":status": 200,
      "content-type": "application/grpc",
      "grpc-status": String(STATUS[status]),
      "grpc-message": percentEncoded(details),
    },
    { endStream: true },
  );
}

/**
 * A malformed message is the caller's `INVALID_ARGUMENT`; anything else is the service's
 * `INTERNAL`, which Envoy takes for the service failing.
 */
function failure(error: unknown): Refusal {
  const invalid = error instanceof EdgelimitError && error.code === "EL_RLS_REQUEST";
  return {
    status: invalid ? "INVALID_ARGUMENT" : "INTERNAL",
    details: error instanceof Error ? error.message : String(error),
  };
}
