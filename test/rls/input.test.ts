import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis } from "../redis/redis-server.js";
import { withinOneWindow } from "../support/windows.js";
import {
  type CallResult,
  grpcJsClient,
  normalize,
  type RlsClient,
  type RlsProcess,
  startRls,
} from "./harness.js";
import { encodeRequest, type RawClient, rawGrpcClient } from "./raw-grpc.js";

/**
 * What a call may hold, through the real service, over gRPC and `POST /json`, counting in memory
 * and in a real redis-server: descriptors that count one counter each add their hits, values
 * are keyed on their bytes, a call beyond the documented limits (docs/proxies.md, "Limits") is
 * `INVALID_ARGUMENT` or 400, and no input is an internal error.
 */

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-input-"));
const configFile = join(dir, "config.yaml");
writeFileSync(
  configFile,
  [
    "domain: input",
    "descriptors:",
    "  - key: client",
    "    rate_limit: { unit: hour, requests_per_unit: 10 }",
    "  - key: byte",
    "    rate_limit: { unit: hour, requests_per_unit: 1 }",
    "",
  ].join("\n"),
);
let stopRedis: (() => Promise<void>) | undefined;
afterAll(async () => {
  await stopRedis?.();
  rmSync(dir, { recursive: true, force: true });
});

type Shape = readonly [string, number] | { readonly error: string };

/** A result as the codes and remaining counts of its descriptors, or its error's code. */
function shape(result: CallResult): Shape[] {
  if (result.error !== undefined) return [{ error: result.error.code }];
  return [
    [result.overall_code ?? "", -1],
    ...(result.statuses ?? []).map((status) => [status.code, status.limit_remaining] as const),
  ];
}

/** One call in both protocols: gRPC (protobufjs's encoding) and `POST /json`. */
interface Protocol {
  readonly name: string;
  call(request: {
    readonly descriptors: readonly { readonly value: string; readonly hits?: number }[];
    readonly hits?: number;
  }): Promise<CallResult>;
}

function protocols(rls: RlsProcess, client: RlsClient): Protocol[] {
  return [
    {
      name: "grpc",
      call: ({ descriptors, hits }) =>
        client.shouldRateLimit({
          domain: "input",
          ...(hits === undefined ? {} : { hits_addend: hits }),
          descriptors: descriptors.map((descriptor) => ({
            entries: [{ key: "client", value: descriptor.value }],
            ...(descriptor.hits === undefined ? {} : { hits_addend: { value: descriptor.hits } }),
          })),
        }),
    },
    {
      name: "json",
      call: async ({ descriptors, hits }) => {
        const response = await postJson(rls, {
          domain: "input",
          ...(hits === undefined ? {} : { hitsAddend: hits }),
          descriptors: descriptors.map((descriptor) => ({
            entries: [{ key: "client", value: descriptor.value }],
            ...(descriptor.hits === undefined ? {} : { hitsAddend: descriptor.hits }),
          })),
        });
        const body = (await response.json()) as Record<string, unknown>;
        if (response.status === 200 || response.status === 429) return normalize(body);
        return { error: { code: `HTTP ${response.status} ${body.error}`, details: "" } };
      },
    },
  ];
}

function postJson(rls: RlsProcess, body: unknown): Promise<Response> {
  return fetch(`http://127.0.0.1:${rls.httpPort}/json`, {
    method: "POST",
    body:
      typeof body === "string"
        ? body
        : body instanceof Buffer
          ? new Blob([new Uint8Array(body)])
          : JSON.stringify(body),
  });
}

const STORES = ["memory", "redis"] as const;

describe.each(STORES)("edgelimit rls counting in %s", (store) => {
  let rls: RlsProcess;
  let client: RlsClient;
  let raw: RawClient;

  beforeAll(async () => {
    // Hour windows: the calls must not straddle the end of an hour.
    await withinOneWindow(3_600_000, 30_000);
    let storeArgs: string[] = [];
    if (store === "redis") {
      const redis = await startRedis();
      stopRedis = redis.cleanup;
      storeArgs = ["--store", redis.server.url];
    }
    rls = await startRls(["--config", configFile, ...storeArgs]);
    client = grpcJsClient(rls.grpcPort);
    raw = rawGrpcClient(rls.grpcPort);
  });

  afterAll(async () => {
    client?.close();
    raw?.close();
    await rls?.stop();
  });

  it("counts each descriptor's hits where descriptors of one call share a counter", async () => {
    for (const protocol of protocols(rls, client)) {
      const six = `six-${protocol.name}`;
      // 6 + 6 against 10: over, as envoyproxy/ratelimit, where each descriptor is an increment.
      const twice = await protocol.call({
        descriptors: [
          { value: six, hits: 6 },
          { value: six, hits: 6 },
        ],
      });
      expect(shape(twice), protocol.name).toEqual([
        ["OVER_LIMIT", -1],
        ["OVER_LIMIT", 0],
        ["OVER_LIMIT", 0],
      ]);
      // The store counted 12, not 6: four more do not fit.
      const four = await protocol.call({ descriptors: [{ value: six, hits: 4 }] });
      expect(shape(four)[0], protocol.name).toEqual(["OVER_LIMIT", -1]);

      const one = `one-${protocol.name}`;
      const ten = await protocol.call({
        descriptors: Array.from({ length: 10 }, () => ({ value: one })),
      });
      // Each answered as the counter stood after its own hit, as envoyproxy/ratelimit answers.
      expect(shape(ten), protocol.name).toEqual([
        ["OK", -1],
        ...[9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map((remaining) => ["OK", remaining]),
      ]);
      const eleventh = await protocol.call({ descriptors: [{ value: one }] });
      expect(shape(eleventh), protocol.name).toEqual([
        ["OVER_LIMIT", -1],
        ["OVER_LIMIT", 0],
      ]);
    }
  });

  it("keys a value on its bytes, so bytes that are not UTF-8 are counted apart", async () => {
    const byte = (value: number[]) =>
      raw.shouldRateLimit(encodeRequest("input", [[["byte", Uint8Array.from(value)]]]));
    // `byte` allows one call an hour per value.
    expect(shape(await byte([0xff]))[0]).toEqual(["OK", -1]);
    expect(shape(await byte([0xfe]))[0]).toEqual(["OK", -1]);
    expect(shape(await byte([0xef, 0xbf, 0xbd]))[0]).toEqual(["OK", -1]); // U+FFFD itself
    expect(shape(await byte([0xff]))[0]).toEqual(["OVER_LIMIT", -1]);
    expect(shape(await byte([0xfe]))[0]).toEqual(["OVER_LIMIT", -1]);
    // The same bytes in a JSON body, and the same value written as JSON's escape for it.
    const body = Buffer.concat([
      Buffer.from('{"domain":"input","descriptors":[{"entries":[{"key":"byte","value":"'),
      Buffer.from([0xfd]),
      Buffer.from('"}]}]}'),
    ]);
    expect((await postJson(rls, body)).status).toBe(200);
    expect(
      (
        await postJson(rls, {
          domain: "input",
          descriptors: [{ entries: [{ key: "byte", value: "\udcfd" }] }],
        })
      ).status,
    ).toBe(429);
    expect(shape(await byte([0xfd]))[0]).toEqual(["OVER_LIMIT", -1]);
    expect(shape(await byte([0xfc]))[0]).toEqual(["OK", -1]);
  });

  it("refuses a call beyond the documented limits with INVALID_ARGUMENT and 400", async () => {
    const [grpc, json] = protocols(rls, client) as [Protocol, Protocol];
    const many = (count: number, prefix: string) =>
      Array.from({ length: count }, (_, index) => ({ value: `${prefix}-${index}` }));
    expect(shape(await grpc.call({ descriptors: many(64, "sixty-four") }))[0]).toEqual(["OK", -1]);
    expect(shape(await grpc.call({ descriptors: many(65, "grpc-65") }))).toEqual([
      { error: "INVALID_ARGUMENT" },
    ]);
    expect(shape(await json.call({ descriptors: many(65, "json-65") }))).toEqual([
      { error: "HTTP 400 invalid_request" },
    ]);
    const entries = (count: number) =>
      Array.from({ length: count }, (_, index) => ({ key: `k${index}`, value: "v" }));
    expect(
      (await client.shouldRateLimit({ domain: "input", descriptors: [{ entries: entries(16) }] }))
        .overall_code,
    ).toBe("OK");
    expect(
      (await client.shouldRateLimit({ domain: "input", descriptors: [{ entries: entries(17) }] }))
        .error?.code,
    ).toBe("INVALID_ARGUMENT");
    // A descriptor's keys and values: 65,536 bytes are read, one more is refused.
    const ofBytes = (total: number) => "x".repeat(total - "client".length);
    expect(shape(await grpc.call({ descriptors: [{ value: ofBytes(65_536) }] }))[0]).toEqual([
      "OK",
      -1,
    ]);
    const over = await grpc.call({ descriptors: [{ value: ofBytes(65_537) }] });
    expect(over.error?.code).toBe("INVALID_ARGUMENT");
    expect(over.error?.details).toContain("65537 bytes");
  });

  it("answers INVALID_ARGUMENT or 400 for numbers beyond what a counter holds and for malformed messages, never an internal error", async () => {
    for (const protocol of protocols(rls, client)) {
      const refused = protocol.name === "grpc" ? "INVALID_ARGUMENT" : "HTTP 400 invalid_request";
      const value = `hits-${protocol.name}`;
      for (const request of [
        { descriptors: [{ value, hits: 1_000_000_001 }] },
        { descriptors: [{ value }], hits: 2_000_000_000 },
        { descriptors: [{ value, hits: 4_294_967_295 }] },
        // Two descriptors of one counter, each within the largest cost, together beyond it.
        {
          descriptors: [
            { value, hits: 600_000_000 },
            { value, hits: 600_000_000 },
          ],
        },
      ]) {
        expect(
          shape(await protocol.call(request)),
          `${protocol.name} ${JSON.stringify(request)}`,
        ).toEqual([{ error: refused }]);
      }
      // The largest cost itself is a cost like any other: over a limit of 10.
      const largest = await protocol.call({ descriptors: [{ value, hits: 1_000_000_000 }] });
      expect(shape(largest)[0], protocol.name).toEqual(["OVER_LIMIT", -1]);
    }
    for (const bytes of [[0x0a, 0x50], [0x12, 0x03, 0x0a, 0x05], [0xff, 0xff], [0x0b]]) {
      expect(shape(await raw.shouldRateLimit(Uint8Array.from(bytes))), String(bytes)).toEqual([
        { error: "INVALID_ARGUMENT" },
      ]);
    }
    expect(rls.logLines().filter((line) => line.level === 50)).toEqual([]);
  });

  it("answers a /json body over 64 KiB with 413 and a JSON body, read by curl and by fetch", async () => {
    for (const size of [70_000, 5_000_000]) {
      const body = join(dir, `body-${size}.json`);
      writeFileSync(
        body,
        JSON.stringify({
          domain: "input",
          descriptors: [{ entries: [{ key: "client", value: "x".repeat(size) }] }],
        }),
      );
      // curl exits 0 with the answer (it exited 52, "Empty reply from server", on a cut connection).
      const { stdout } = await run("curl", [
        "-sS",
        "-o",
        "-",
        "-w",
        "\n%{http_code} %{content_type}",
        "--data-binary",
        `@${body}`,
        `http://127.0.0.1:${rls.httpPort}/json`,
      ]);
      const [answer, status] = stdout.split("\n");
      expect(status).toBe("413 application/json");
      expect(JSON.parse(answer as string)).toEqual({
        error: "request_too_large",
        message: "the body is larger than 65536 bytes",
      });
      const fetched = await postJson(rls, "x".repeat(size));
      expect(fetched.status).toBe(413);
      expect(await fetched.json()).toMatchObject({ error: "request_too_large" });
    }
    // The connection is still good for the next call.
    expect(
      (
        await postJson(rls, {
          domain: "input",
          descriptors: [{ entries: [{ key: "client", value: "after" }] }],
        })
      ).status,
    ).toBe(200);
  });
});

describe("edgelimit rls --max-descriptor-bytes", () => {
  it("reads descriptors up to the bytes it names, for an Envoy whose header limit was raised", async () => {
    const rls = await startRls(["--config", configFile, "--max-descriptor-bytes", "100000"]);
    const client = grpcJsClient(rls.grpcPort);
    try {
      const call = (bytes: number) =>
        client.shouldRateLimit({
          domain: "input",
          descriptors: [
            { entries: [{ key: "client", value: "y".repeat(bytes - "client".length) }] },
          ],
        });
      expect((await call(100_000)).overall_code).toBe("OK");
      expect((await call(100_001)).error?.code).toBe("INVALID_ARGUMENT");
    } finally {
      client.close();
      await rls.stop();
    }
  });
});
