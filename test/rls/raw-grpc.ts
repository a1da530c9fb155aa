/**
 * `ShouldRateLimit` with bytes no protobuf library writes for a `string` field: values that are
 * not UTF-8 (as Envoy sends a header's bytes) and messages that are not protobuf at all. The
 * call is made by `@grpc/grpc-js`; the message is written here with protobufjs's `Writer`, and
 * the answer read with Envoy's own `.proto` files (harness.ts).
 */
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { type CallResult, normalize, upstreamRoot } from "./harness.js";

const SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/** A descriptor: its entries, each a key and a value given as bytes. */
export type RawDescriptor = readonly (readonly [string, Uint8Array])[];

/** `RateLimitRequest { domain, descriptors: [{ entries: [{ key, value }] }] }`, by field number. */
export function encodeRequest(domain: string, descriptors: readonly RawDescriptor[]): Uint8Array {
  const writer = protobuf.Writer.create();
  writer.uint32((1 << 3) | 2).string(domain);
  for (const entries of descriptors) {
    const descriptor = protobuf.Writer.create();
    for (const [key, value] of entries) {
      const entry = protobuf.Writer.create();
      entry.uint32((1 << 3) | 2).string(key);
      entry.uint32((2 << 3) | 2).bytes(value);
      descriptor.uint32((1 << 3) | 2).bytes(entry.finish());
    }
    writer.uint32((2 << 3) | 2).bytes(descriptor.finish());
  }
  return writer.finish();
}

export interface RawClient {
  shouldRateLimit(message: Uint8Array): Promise<CallResult>;
  close(): void;
}

export function rawGrpcClient(port: number): RawClient {
  const Response = upstreamRoot().lookupType("envoy.service.ratelimit.v3.RateLimitResponse");
  const Client = grpc.makeGenericClientConstructor(
    {
      ShouldRateLimit: {
        path: SHOULD_RATE_LIMIT,
        requestStream: false,
        responseStream: false,
        requestSerialize: (bytes: Uint8Array) => Buffer.from(bytes),
        requestDeserialize: (bytes: Buffer) => bytes,
        responseSerialize: (bytes: Buffer) => bytes,
        responseDeserialize: (bytes: Buffer) => bytes,
      },
    },
    "RawRateLimit",
  );
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  type Unary = (
    message: Uint8Array,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response: Buffer) => void,
  ) => void;
  return {
    shouldRateLimit: (message) =>
      new Promise((resolve) => {
        const method = Reflect.get(client, "ShouldRateLimit") as Unary;
        method.call(client, message, { deadline: Date.now() + 10_000 }, (error, response) => {
          if (error !== null) {
            resolve({
              error: {
                code: grpc.status[error.code] ?? String(error.code),
                details: error.details,
              },
            });
            return;
          }
          const decoded = Response.toObject(Response.decode(response), {
            enums: String,
            longs: Number,
            defaults: false,
          });
          resolve(normalize(decoded));
        });
      }),
    close: () => client.close(),
  };
}
