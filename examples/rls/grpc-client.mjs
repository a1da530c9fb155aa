#!/usr/bin/env node
// Calls edgelimit rls (or envoyproxy/ratelimit) over gRPC as Envoy does, and prints the answer
// as JSON. Needs @grpc/grpc-js and protobufjs (npm install @grpc/grpc-js protobufjs) and
// ratelimit.proto beside this file. Tested by test/rls/clients.test.ts; docs/proxies.md.
//
//   node grpc-client.mjs [--address HOST:PORT] [--hits N] DOMAIN DESCRIPTOR...
//
// Each DESCRIPTOR is one descriptor, its entries written key=value and separated by commas:
//   node grpc-client.mjs edgelimit remote_address=203.0.113.7,path=/api/export,method=GET
// The exit code is 0 when the answer is OK, 2 when it is OVER_LIMIT, 1 on an error.
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";

const METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

const { values, positionals } = parseArgs({
  options: {
    address: { type: "string", default: "127.0.0.1:8081" },
    hits: { type: "string", default: "0" },
  },
  allowPositionals: true,
});
const [domain, ...descriptors] = positionals;
if (domain === undefined || descriptors.length === 0) {
  process.stderr.write(
    "usage: node grpc-client.mjs [--address HOST:PORT] [--hits N] DOMAIN key=value[,key=value...]...\n",
  );
  process.exit(1);
}

const root = protobuf.loadSync(fileURLToPath(new URL("ratelimit.proto", import.meta.url)));
const Request = root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
const Response = root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse");

const request = Request.fromObject({
  domain,
  hitsAddend: Number(values.hits),
  descriptors: descriptors.map((descriptor) => ({
    entries: descriptor.split(",").map((entry) => {
      const equals = entry.indexOf("=");
      if (equals < 1) {
        process.stderr.write(`an entry is key=value; got "${entry}"\n`);
        process.exit(1);
      }
      return { key: entry.slice(0, equals), value: entry.slice(equals + 1) };
    }),
  })),
});

const client = new grpc.Client(values.address, grpc.credentials.createInsecure());
client.makeUnaryRequest(
  METHOD,
  (message) => Buffer.from(Request.encode(message).finish()),
  (bytes) => Response.decode(bytes),
  request,
  { deadline: Date.now() + 5_000 },
  (error, response) => {
    client.close();
    if (error) {
      process.stderr.write(`${grpc.status[error.code]}: ${error.details}\n`);
      process.exit(1);
    }
    const answer = Response.toObject(response, { enums: String, longs: Number });
    process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    process.exit(answer.overallCode === "OVER_LIMIT" ? 2 : 0);
  },
);
