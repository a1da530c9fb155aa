/**
 * The transport's floor for bench/rls.bench.ts: a `ShouldRateLimit` server that reads each call
 * and answers it with the same canned message (OK for both of the bench's descriptors, with
 * their limits and what remains, as `edgelimit rls` answers them), deciding nothing. `http2`
 * serves it on node:http2 with gRPC's framing and trailers written by hand, `grpc-js` on
 * @grpc/grpc-js with the message passed through as bytes. `listener` is rls's own gRPC
 * listener (src/rls/grpc.ts: each call decoded, the canned answer encoded) with no decision
 * behind it: what rls's transport costs beyond the floor. `http1` is the floor of `/check`: a
 * node:http server answering every request 200 with the headers rls's allow carries. Prints
 * its port on stdout.
 */
import { createServer as createHttp1Server } from "node:http";
import { createServer } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import type { RlsAnswer } from "../../src/rls/answer.js";
import { encodeRateLimitResponse } from "../../src/rls/codec.js";
import { startGrpc } from "../../src/rls/grpc.js";
import { CODE, type RateLimitResponse, SERVING_STATUS, UNIT } from "../../src/rls/messages.js";

const PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const status = (requestsPerUnit: number) => ({
  code: CODE.OK,
  currentLimit: { name: "", requestsPerUnit, unit: UNIT.MINUTE },
  limitRemaining: requestsPerUnit - 1,
  durationUntilResetMs: 31_250,
});
const response: RateLimitResponse = {
  overallCode: CODE.OK,
  statuses: [status(600), status(300)],
  responseHeadersToAdd: [],
  requestHeadersToAdd: [],
};
const message = encodeRateLimitResponse(response);
const frame = Buffer.alloc(5 + message.length);
frame.writeUInt32BE(message.length, 1);
message.copy(frame, 5);

// Exits on SIGTERM rather than dying of it, so that `node --cpu-prof` writes its profile.
process.on("SIGTERM", () => process.exit(0));

const kind = process.argv[2];
if (kind === "http2") {
  const server = createServer();
  server.on("stream", (stream) => {
    stream.on("data", () => undefined);
    stream.on("end", () => {
      stream.respond(
        { ":status": 200, "content-type": "application/grpc" },
        { waitForTrailers: true },
      );
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frame);
    });
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${(server.address() as { port: number }).port}\n`);
  });
} else if (kind === "grpc-js") {
  const server = new grpc.Server();
  const bytes = (value: Buffer) => value;
  server.addService(
    {
      ShouldRateLimit: {
        path: PATH,
        requestStream: false,
        responseStream: false,
        requestSerialize: bytes,
        requestDeserialize: bytes,
        responseSerialize: bytes,
        responseDeserialize: bytes,
      },
    },
    {
      ShouldRateLimit: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) =>
        callback(null, message),
    },
  );
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => {
    if (error !== null) throw error;
    process.stdout.write(`${port}\n`);
  });
} else if (kind === "http1") {
  const headers = {
    "x-edgelimit-action": "allow",
    "ratelimit-policy": '"anonymous.global";q=60;w=60',
    ratelimit: '"anonymous.global";r=59;t=42',
    "content-length": "0",
  };
  const server = createHttp1Server((req, res) => {
    req.resume();
    res.writeHead(200, headers);
    res.end();
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${(server.address() as { port: number }).port}\n`);
  });
} else if (kind === "listener") {
  const answer: RlsAnswer = {
    response,
    unavailable: undefined,
    record: {
      action: "allow",
      reason: "within-limit",
      rule: undefined,
      tier: "anonymous",
      subject: "",
      durationMs: 0,
      shadowed: [],
    },
  };
  const listener = await startGrpc(
    { shouldRateLimit: () => answer, health: () => SERVING_STATUS.SERVING, maxDescriptors: 64 },
    "127.0.0.1",
    0,
  );
  process.stdout.write(`${listener.port}\n`);
} else {
  process.stderr.write("usage: canned-rls-process.ts http2|grpc-js|listener|http1\n");
  process.exitCode = 2;
}
