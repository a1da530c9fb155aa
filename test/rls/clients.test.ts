import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import protobuf from "protobufjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JWT_SECRET } from "../support/jwt.js";
import { HOUR_MS, hourPolicyFile, withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls, upstreamRoot } from "./harness.js";

/**
 * The calls docs/proxies.md shows under "Calling rls yourself", run as written there with only
 * the ports changed, against `edgelimit rls --policy examples/policies/cloudfront.yaml`; and the
 * one-file examples/rls/ratelimit.proto they use, field by field against Envoy's own files.
 */

const run = promisify(execFile);
const SEED = "examples/policies/cloudfront.yaml";
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-clients-"));
/** rls with the seed policy, as the docs run it. */
let rls: RlsProcess;
/** rls with the seed policy's windows an hour, for a test not about the documented text. */
let hourly: RlsProcess;

beforeAll(async () => {
  const env = { EDGELIMIT_JWT_SECRET: JWT_SECRET, EDGELIMIT_CHALLENGE_SECRET: JWT_SECRET };
  [rls, hourly] = await Promise.all([
    startRls(["--policy", SEED], { env }),
    startRls(["--policy", hourPolicyFile(SEED, dir)], { env }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([rls?.stop(), hourly?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** The shell commands of the section's ```sh blocks, one a line. */
function documentedCommands(): string[] {
  const docs = readFileSync("docs/proxies.md", "utf8");
  const start = docs.indexOf("## Calling rls yourself");
  const end = docs.indexOf("\n## ", start + 1);
  const section = docs.slice(start, end);
  const commands: string[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of (block[1] ?? "").split("\n")) {
      if (line.trim() !== "" && !line.trim().startsWith("#")) commands.push(line);
    }
  }
  return commands;
}

/** Runs a documented command with rls's ports in place of the defaults. */
async function runDocumented(command: string): Promise<{ code: number; stdout: string }> {
  const local = command
    .replaceAll("127.0.0.1:8081", `127.0.0.1:${rls.grpcPort}`)
    .replaceAll("127.0.0.1:8080", `127.0.0.1:${rls.httpPort}`);
  try {
    const { stdout } = await run("sh", ["-c", local], { timeout: 30_000 });
    return { code: 0, stdout };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    throw new Error(`"${local}" exited ${failed.code}: ${failed.stderr}${failed.stdout}`);
  }
}

describe("calling rls as docs/proxies.md shows", () => {
  it("documents one gRPC call (examples/rls/grpc-client.mjs) and one curl to POST /json", () => {
    const commands = documentedCommands();
    expect(commands).toHaveLength(2);
    expect(commands[0]).toMatch(
      /^node examples\/rls\/grpc-client\.mjs --address 127\.0\.0\.1:8081 /,
    );
    expect(commands[1]).toMatch(/^curl -s -X POST http:\/\/127\.0\.0\.1:8080\/json /);
  });

  it("answers both as the text says: OK with 2 left over gRPC, then OK with 1 left on /json", async () => {
    // The seed's minute windows, as the text says ("3 per MINUTE"): both calls in one minute.
    await withinOneWindow(60_000, 10_000);
    const [grpcCall, jsonCall] = documentedCommands() as [string, string];
    const overGrpc = JSON.parse((await runDocumented(grpcCall)).stdout);
    expect(overGrpc).toMatchObject({
      overallCode: "OK",
      statuses: [
        {
          code: "OK",
          currentLimit: { name: "anonymous.path./api/export", requestsPerUnit: 3, unit: "MINUTE" },
          limitRemaining: 2,
        },
      ],
    });
    expect(overGrpc.requestHeadersToAdd).toEqual([{ key: "x-ratelimit-remaining", value: "2" }]);
    const overJson = JSON.parse((await runDocumented(jsonCall)).stdout);
    expect(overJson).toMatchObject({ overallCode: "OK", statuses: [{ limitRemaining: 1 }] });
  });

  it("exits 2 from the gRPC client once the limit is spent", async () => {
    // Four node processes, each loading @grpc/grpc-js and protobufjs: seconds on a busy machine.
    // The three within the limit start together; the fourth once they are counted.
    await withinOneWindow(HOUR_MS, 15_000);
    const client = "examples/rls/grpc-client.mjs";
    const args = ["edgelimit", "remote_address=203.0.113.99,path=/api/export,method=GET"];
    const call = () =>
      run(process.execPath, [client, "--address", `127.0.0.1:${hourly.grpcPort}`, ...args], {
        timeout: 30_000,
      }).then(
        () => 0,
        (error: { code?: number }) => error.code ?? -1,
      );
    const codes = await Promise.all([call(), call(), call()]);
    codes.push(await call());
    expect(codes).toEqual([0, 0, 0, 2]);
  }, 90_000);
});

describe("examples/rls/ratelimit.proto", () => {
  /** Its messages, and where Envoy keeps each. */
  const COUNTERPARTS: readonly [string, string][] = [
    ["RateLimitRequest", "envoy.service.ratelimit.v3.RateLimitRequest"],
    ["RateLimitDescriptor", "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor"],
    ["RateLimitDescriptor.Entry", "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry"],
    [
      "RateLimitDescriptor.RateLimitOverride",
      "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride",
    ],
    ["RateLimitResponse", "envoy.service.ratelimit.v3.RateLimitResponse"],
    ["RateLimitResponse.RateLimit", "envoy.service.ratelimit.v3.RateLimitResponse.RateLimit"],
    [
      "RateLimitResponse.DescriptorStatus",
      "envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus",
    ],
    ["HeaderValue", "envoy.config.core.v3.HeaderValue"],
  ];

  it("has Envoy's numbers, names and types for every field it declares", () => {
    const ours = new protobuf.Root().loadSync("examples/rls/ratelimit.proto", { keepCase: true });
    const upstream = upstreamRoot();
    const counterpart = new Map(
      COUNTERPARTS.map(([name, theirs]) => [`envoy.service.ratelimit.v3.${name}`, theirs]),
    );
    for (const [name, theirs] of COUNTERPARTS) {
      const mine = ours.lookupType(`envoy.service.ratelimit.v3.${name}`);
      const envoy = upstream.lookupType(theirs);
      for (const field of mine.fieldsArray) {
        const match = envoy.fieldsById[field.id];
        expect(match?.name, `${name}.${field.name}`).toBe(field.name);
        expect(match?.repeated, `${name}.${field.name}`).toBe(field.repeated);
        field.resolve();
        match?.resolve();
        if (field.resolvedType instanceof protobuf.Type) {
          const expected =
            counterpart.get(field.resolvedType.fullName.slice(1)) ??
            field.resolvedType.fullName.slice(1);
          expect(match?.resolvedType?.fullName.slice(1), `${name}.${field.name}`).toBe(expected);
        } else if (field.resolvedType instanceof protobuf.Enum) {
          expect(match?.resolvedType, `${name}.${field.name}`).toBeInstanceOf(protobuf.Enum);
          expect((match?.resolvedType as protobuf.Enum | undefined)?.values).toEqual(
            field.resolvedType.values,
          );
        } else {
          expect(match?.type, `${name}.${field.name}`).toBe(field.type);
        }
      }
    }
  });

  it("compiles with protoc, for the other gRPC stacks", async () => {
    await run("protoc", [
      "-Iexamples/rls",
      "-I/usr/include",
      "--descriptor_set_out=/dev/null",
      "examples/rls/ratelimit.proto",
    ]);
  });
});
