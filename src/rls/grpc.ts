/**
 * The gRPC listener: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
 * `grpc.health.v1.Health/Check`, served by `@grpc/grpc-js` (an optional peer dependency, loaded
 * only here) with the messages encoded by codec.ts.
 */
import type * as Grpc from "@grpc/grpc-js";
import { EdgelimitError } from "../core/errors.js";
import type { RlsAnswer } from "./answer.js";
import {
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "./codec.js";
import type { RateLimitRequest, RateLimitResponse, ServingStatus } from "./messages.js";

export const SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
export const HEALTH_CHECK = "/grpc.health.v1.Health/Check";

/** The names `grpc.health.v1.Health/Check` answers for: the server, and the service by name. */
const HEALTH_SERVICES = new Set(["", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"]);

export interface GrpcHandlers {
  shouldRateLimit(
    request: RateLimitRequest,
    peer: string | undefined,
  ): RlsAnswer | Promise<RlsAnswer>;
  health(): ServingStatus;
  /** Descriptors read in one call: the decoder stops at the one past it. */
  readonly maxDescriptors: number;
  /** Called after each call with its outcome, for metrics. Must not throw. */
  onCall?(method: "ShouldRateLimit" | "Check", code: string): void;
}

export interface GrpcListener {
  readonly port: number;
  /** Stops accepting calls, lets those in flight finish (at most `graceMs`), then closes. */
  close(graceMs: number): Promise<void>;
}

export async function startGrpc(
  handlers: GrpcHandlers,
  host: string,
  port: number,
): Promise<GrpcListener> {
  const grpc = await loadGrpc();
  const server = new grpc.Server({
    // Envoy's requests are a few hundred bytes; nothing legitimate comes near this.
    "grpc.max_receive_message_length": 1024 * 1024,
  });
  const unary = <Request, Response>(
    path: string,
    decode: (bytes: Buffer) => Request,
    encode: (response: Response) => Buffer,
  ): Grpc.MethodDefinition<Request, Response> => ({
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: () => {
      throw new Error("the server never sends requests");
    },
    requestDeserialize: decode,
    responseSerialize: encode,
    responseDeserialize: () => {
      throw new Error("the server never reads responses");
    },
  });
  const notify = (method: "ShouldRateLimit" | "Check", code: string): void => {
    try {
      handlers.onCall?.(method, code);
    } catch {
      // Observers must never change an answer.
    }
  };

  server.addService(
    {
      ShouldRateLimit: unary(
        SHOULD_RATE_LIMIT,
        decodedOrError((bytes) => decodeRateLimitRequest(bytes, handlers.maxDescriptors)),
        encodeRateLimitResponse,
      ),
    },
    {
      ShouldRateLimit: (
        call: Grpc.ServerUnaryCall<RateLimitRequest | EdgelimitError, RateLimitResponse>,
        callback: Grpc.sendUnaryData<RateLimitResponse>,
      ) => {
        const reply = (answer: RlsAnswer): void => {
          if (answer.response !== undefined) {
            notify("ShouldRateLimit", "OK");
            callback(null, answer.response);
            return;
          }
          notify("ShouldRateLimit", "UNAVAILABLE");
          callback({
            code: grpc.status.UNAVAILABLE,
            details: `rate limit store unavailable: ${answer.unavailable?.cause ?? "failed"}`,
          });
        };
        const fail = (error: unknown): void => {
          const invalid = error instanceof EdgelimitError && error.code === "EL_RLS_REQUEST";
          notify("ShouldRateLimit", invalid ? "INVALID_ARGUMENT" : "INTERNAL");
          callback({
            code: invalid ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL,
            details: error instanceof Error ? error.message : String(error),
          });
        };
        const request = call.request;
        if (request instanceof EdgelimitError) {
          fail(request);
          return;
        }
        try {
          const answer = handlers.shouldRateLimit(request, peerAddress(call.getPeer()));
          if (answer instanceof Promise) answer.then(reply, fail);
          else reply(answer);
        } catch (error) {
          fail(error);
        }
      },
    },
  );
  server.addService(
    {
      Check: unary(
        HEALTH_CHECK,
        decodedOrError(decodeHealthCheckRequest),
        encodeHealthCheckResponse,
      ),
    },
    {
      Check: (
        call: Grpc.ServerUnaryCall<{ readonly service: string } | EdgelimitError, ServingStatus>,
        callback: Grpc.sendUnaryData<ServingStatus>,
      ) => {
        if (call.request instanceof EdgelimitError) {
          notify("Check", "INVALID_ARGUMENT");
          callback({ code: grpc.status.INVALID_ARGUMENT, details: call.request.message });
          return;
        }
        const { service } = call.request;
        if (!HEALTH_SERVICES.has(service)) {
          notify("Check", "NOT_FOUND");
          callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${service}"` });
          return;
        }
        notify("Check", "OK");
        callback(null, handlers.health());
      },
    },
  );

  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      `${host.includes(":") ? `[${host}]` : host}:${port}`,
      grpc.ServerCredentials.createInsecure(),
      (error, actual) => (error === null ? resolve(actual) : reject(error)),
    );
  });
  return {
    port: bound,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/**
 * A decoder that hands its refusal to the method as a value: grpc-js answers a deserializer
 * that throws with `INTERNAL`, which Envoy would take for the service failing, where a
 * malformed message is the caller's `INVALID_ARGUMENT`.
 */
export function decodedOrError<Message>(
  decode: (bytes: Buffer) => Message,
): (bytes: Buffer) => Message | EdgelimitError {
  return (bytes) => {
    try {
      return decode(bytes);
    } catch (error) {
      if (error instanceof EdgelimitError) return error;
      throw error;
    }
  };
}

/** `@grpc/grpc-js`, or an error that says to install it. */
async function loadGrpc(): Promise<typeof Grpc> {
  try {
    return await import("@grpc/grpc-js");
  } catch (error) {
    if ((error as { code?: string }).code !== "ERR_MODULE_NOT_FOUND") throw error;
    throw new EdgelimitError(
      "EL_MISSING_PACKAGE",
      "edgelimit rls needs the package @grpc/grpc-js for its gRPC listener, which is not installed (it is optional, so that editions that do not use it do not install it): npm install @grpc/grpc-js",
    );
  }
}

/** The address of a peer as grpc-js reports it (`127.0.0.1:52044`, `::1:52044`). */
export function peerAddress(peer: string): string | undefined {
  const bare = peer.replace(/^ipv[46]:/, "");
  const match = /^\[?(.*?)\]?:(\d+)$/.exec(bare);
  const address = match?.[1] ?? bare;
  return address === "" ? undefined : address;
}
