/**
 * A REST-to-Redis bridge in front of a real redis-server, for the Redis-over-HTTP store's tests:
 * the Upstash REST protocol as the store uses it and as Upstash documents it. `POST /` with a
 * command as a JSON array answers `{"result": …}`, or `{"error": "…"}` with status 400 when Redis
 * refuses it; `POST /pipeline` takes an array of commands and answers one of those objects
 * each; `POST /multi-exec` runs them in a transaction. Every request must carry
 * `Authorization: Bearer <token>` (401 otherwise). Redis does the work: the bridge only
 * translates, on a loopback port, and counts the requests it served.
 */
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";

const MAX_BODY_BYTES = 1 << 20;

export interface RedisRestBridge {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly token: string;
  /** HTTP requests answered, by path (`/`, `/pipeline`, `/multi-exec`), refused ones included. */
  readonly requests: Readonly<Record<string, number>>;
  close(): Promise<void>;
}

type Command = [string, ...(string | number)[]];

export async function startRedisRestBridge(
  redisUrl: string,
  token = randomBytes(24).toString("base64url"),
): Promise<RedisRestBridge> {
  // No offline queue and no retries: a redis-server that is down is an error at once, which the
  // bridge answers as Upstash does, with an error object.
  const redis = new Redis(redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 50,
  });
  redis.on("error", () => {});
  // Serve once connected: a bridge that answers its first requests with "not writeable" is not
  // what the stores in front of it are tested against.
  if (redis.status !== "ready") await once(redis, "ready");
  const requests: Record<string, number> = {};

  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://bridge.invalid").pathname;
    requests[path] = (requests[path] ?? 0) + 1;
    serve(request, response, path).catch((error: unknown) => {
      answer(response, 500, { error: error instanceof Error ? error.message : String(error) });
    });
  });

  async function serve(request: IncomingMessage, response: ServerResponse, path: string) {
    if (request.headers.authorization !== `Bearer ${token}`) {
      request.resume();
      return answer(response, 401, { error: "Unauthorized" });
    }
    if (request.method !== "POST") return answer(response, 405, { error: "POST only" });
    const body = JSON.parse(await readBody(request)) as unknown;
    if (path === "/" || path === "") {
      if (!isCommand(body)) return answer(response, 400, { error: "ERR not a command" });
      try {
        return answer(response, 200, { result: await redis.call(...body) });
      } catch (error) {
        return answer(response, 400, { error: (error as Error).message });
      }
    }
    if (path === "/pipeline" || path === "/multi-exec") {
      if (!Array.isArray(body) || !body.every(isCommand)) {
        return answer(response, 400, { error: "ERR not a list of commands" });
      }
      const batch = path === "/pipeline" ? redis.pipeline() : redis.multi();
      for (const [name, ...args] of body as Command[]) batch.call(name, ...args);
      const results = (await batch.exec()) ?? [];
      return answer(
        response,
        200,
        results.map(([error, result]) =>
          error === null ? { result } : { error: (error as Error).message },
        ),
      );
    }
    return answer(response, 404, { error: `no such endpoint ${path}` });
  }

  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      redis.disconnect();
    },
  };
}

function isCommand(value: unknown): value is Command {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((part) => typeof part === "string" || typeof part === "number")
  );
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent) return;
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error("ERR request body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
