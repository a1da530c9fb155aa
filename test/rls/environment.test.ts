import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { readEnvironment } from "../../src/rls/environment.js";

/**
 * envoyproxy/ratelimit's environment variables, as a manifest written for it sets them: where
 * the configuration is, which Redis, which ports. test/rls/redis.test.ts starts one process
 * with them alone.
 */

const root = mkdtempSync(join(tmpdir(), "edgelimit-rls-env-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("envoyproxy/ratelimit's variables", () => {
  it("find the configuration under RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and RUNTIME_APPDIRECTORY", () => {
    expect(
      readEnvironment({ RUNTIME_ROOT: root, RUNTIME_SUBDIRECTORY: "ratelimit" }).configPath,
    ).toBe(join(root, "ratelimit", "config"));
    expect(readEnvironment({ RUNTIME_ROOT: root, RUNTIME_APPDIRECTORY: "limits" }).configPath).toBe(
      join(root, "limits"),
    );
    // Without RUNTIME_ROOT, the default directory only where it exists.
    expect(readEnvironment({}).configPath).toBeUndefined();
    mkdirSync(join(root, "exists", "config"), { recursive: true });
    expect(readEnvironment({ RUNTIME_ROOT: join(root, "exists") }).configPath).toBe(
      join(root, "exists", "config"),
    );
  });

  it("make REDIS_URL a store URL, with REDIS_TYPE, REDIS_AUTH and REDIS_TLS", () => {
    expect(readEnvironment({ REDIS_URL: "redis:6379", REDIS_SOCKET_TYPE: "tcp" }).storeUrl).toBe(
      "redis://redis:6379",
    );
    expect(
      readEnvironment({
        REDIS_URL: "r1:7000,r2:7000,r3:7000",
        REDIS_TYPE: "CLUSTER",
        REDIS_AUTH: "s3cr:t",
        REDIS_TLS: "true",
      }).storeUrl,
    ).toBe("rediss+cluster://s3cr:t@r1:7000,r2:7000,r3:7000");
    expect(readEnvironment({ REDIS_URL: "redis:6379", REDIS_AUTH: "p@ss" }).storeUrl).toBe(
      "redis://:p%40ss@redis:6379",
    );
    expect(readEnvironment({ REDIS_URL: "redis://cache:6380/2" }).storeUrl).toBe(
      "redis://cache:6380/2",
    );
    expect(readEnvironment({}).storeUrl).toBeUndefined();
  });

  it("read the ports, the hosts and the modes", () => {
    const environment = readEnvironment({
      PORT: "18080",
      GRPC_PORT: "18081",
      HOST: "127.0.0.1",
      GRPC_HOST: "::1",
      SHADOW_MODE: "true",
      MERGE_DOMAIN_CONFIG: "1",
      LIMIT_RESPONSE_HEADERS_ENABLED: "true",
      LIMIT_REMAINING_HEADER: "X-Left",
    });
    expect(environment).toMatchObject({
      httpPort: "18080",
      grpcPort: "18081",
      httpHost: "127.0.0.1",
      grpcHost: "::1",
      globalShadow: true,
      mergeDomains: true,
      limitHeaders: { limit: "ratelimit-limit", remaining: "x-left", reset: "ratelimit-reset" },
    });
  });

  it.each([
    [{ CONFIG_TYPE: "GRPC_XDS_SOTW" }, "xDS configuration"],
    [{ BACKEND_TYPE: "memcache" }, "memcached is not supported"],
    [{ REDIS_TYPE: "SENTINEL" }, "Sentinel"],
    [{ REDIS_URL: "/var/run/nutcracker/ratelimit.sock" }, "unix socket"],
    [{ REDIS_URL: "redis:6379", REDIS_SOCKET_TYPE: "unix" }, "REDIS_SOCKET_TYPE=tcp"],
  ])("refuse what would count elsewhere: %o", (env, message) => {
    expect(() => readEnvironment(env)).toThrow(EdgelimitError);
    expect(() => readEnvironment(env)).toThrow(message);
  });

  it("say which variables have no effect here", () => {
    expect(readEnvironment({ REDIS_PERSECOND: "true", DEBUG_PORT: "6070" }).notes).toEqual([
      expect.stringContaining("REDIS_PERSECOND"),
      expect.stringContaining("DEBUG_PORT has no effect"),
    ]);
  });
});
