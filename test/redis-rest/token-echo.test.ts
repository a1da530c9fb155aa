/**
 * An HTTP store's endpoint that echoes the request's `Authorization` field (or a session token)
 * in an error body: the secret appears nowhere the store's errors go. A real HTTP server on
 * loopback answers each way an error can be quoted.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { DynamoDbFetchStore } from "../../src/stores/dynamodb-fetch.js";
import { RedisRestStore } from "../../src/stores/redis-rest.js";
import { startOrigin, type TestServer } from "../gateway/helpers.js";
import { startServe } from "../support/serve-process.js";

const TOKEN = "AYe9c2VjcmV0LXRva2VuLXRoYXQtbXVzdC1uZXZlci1sZWFr";
const SESSION_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLEsessionTOKENthatMustNotLeak/+=";

/** How the echoing endpoint answers: each one quotes the request's fields another way. */
type Echo = (fields: string, response: ServerResponse) => void;
const ECHOES: Record<string, Echo> = {
  "a 500 with the fields as text": (fields, response) => {
    response.writeHead(500, { "content-type": "text/plain" }).end(`upstream failed for ${fields}`);
  },
  "a 400 with the fields in an error reply": (fields, response) => {
    response
      .writeHead(400, { "content-type": "application/json" })
      .end(JSON.stringify({ error: `ERR bad request ${fields}` }));
  },
  "a 400 with the fields in a DynamoDB error": (fields, response) => {
    response.writeHead(400).end(
      JSON.stringify({
        __type: "com.amazon.coral.validate#ValidationException",
        message: `The security token included in the request is invalid: ${fields}`,
      }),
    );
  },
  "a 502 with the fields in JSON": (fields, response) => {
    response.writeHead(502).end(JSON.stringify({ received: fields }));
  },
  "a 200 that is no answer": (fields, response) => {
    response.writeHead(200).end(JSON.stringify({ echo: fields }));
  },
};

const DYNAMODB_QUOTES = new Set([
  "a 500 with the fields as text",
  "a 400 with the fields in a DynamoDB error",
]);

let echo: Echo = ECHOES["a 500 with the fields as text"] as Echo;
let endpoint: Server;
let url: string;
let origin: TestServer;
const dir = mkdtempSync(join(tmpdir(), "edgelimit-token-echo-"));
const children: ChildProcess[] = [];

function fieldsOf(request: IncomingMessage): string {
  const { authorization, "x-amz-security-token": session } = request.headers;
  // The session token first: a quote is cut at 200 characters, after the secrets are hidden.
  return `x-amz-security-token=${session ?? ""} authorization=${authorization}`;
}

beforeAll(async () => {
  endpoint = createServer((request, response) => {
    request.resume();
    request.on("end", () => echo(fieldsOf(request), response));
  });
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
  origin = await startOrigin((_req, res) => res.end("origin"));
  writeFileSync(join(dir, "policy.yaml"), "version: 1\ntiers:\n  anonymous:\n    global: 5\n");
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await origin?.close();
  await new Promise((resolve) => endpoint?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const policy = definePolicy({ version: 1, tiers: { anonymous: { global: 5 } } });

/** Everything the store's failures reached, as text: a secret in any of it is a leak. */
async function failuresOf(store: Store): Promise<string[]> {
  const seen: unknown[] = [];
  const limiter = createLimiter({ policy, store, onStoreError: (error) => seen.push(error) });
  const verdict = await limiter.check({ ip: "203.0.113.5", path: "/" });
  expect(verdict.reason).toBe("store-failed-local");
  expect(seen).toHaveLength(1);
  const texts = [
    String(verdict.storeError),
    ...seen.map((error) => inspect(error, { depth: 5 })),
    JSON.stringify(store.traits?.status?.() ?? {}),
  ];
  if (store instanceof RedisRestStore) {
    texts.push(
      await store.ready().then(
        () => "",
        (error: unknown) => inspect(error),
      ),
    );
    texts.push(
      await limiter.reset({ ip: "203.0.113.5", path: "/" }).then(
        () => "",
        (error: unknown) => inspect(error),
      ),
    );
  }
  return texts;
}

describe.each(Object.keys(ECHOES))("an endpoint that answers %s", (how) => {
  it("never shows the Redis REST token", async () => {
    echo = ECHOES[how] as Echo;
    const texts = await failuresOf(new RedisRestStore({ url, token: TOKEN, maxBatch: 1 }));
    // The answer is still quoted, with the token hidden.
    expect(texts.join("\n")).toContain("***");
    for (const text of texts) expect(text).not.toContain(TOKEN);
  });

  // DynamoDB quotes an answer that is not JSON, and an error's message; other answers it reads.
  it.runIf(DYNAMODB_QUOTES.has(how))(
    "never shows the DynamoDB request's signature or session token, over fetch or node:https",
    async () => {
      echo = ECHOES[how] as Echo;
      const options = {
        table: "edgelimit",
        region: "us-east-1",
        endpoint: url,
        credentials: {
          accessKeyId: "AKIDEXAMPLE",
          secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
          sessionToken: SESSION_TOKEN,
        },
      };
      for (const store of [new DynamoDbFetchStore(options), new DynamoDbStore(options)]) {
        try {
          for (const text of await failuresOf(store)) {
            expect(text).not.toContain(SESSION_TOKEN);
            expect(text).not.toMatch(/Signature=[0-9a-f]{64}/);
          }
        } finally {
          await store.close();
        }
      }
    },
  );
});

describe("serve --store redis+http:// in front of an endpoint that echoes the token", () => {
  it("never logs it", async () => {
    echo = ECHOES["a 500 with the fields as text"] as Echo;
    const served = await startServe({
      policy: join(dir, "policy.yaml"),
      upstream: origin.url,
      args: ["--store", `redis+http://${url.slice("http://".length)}`, "--log-sample", "1"],
      env: { EDGELIMIT_REDIS_REST_TOKEN: TOKEN },
    });
    children.push(served.child);
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${served.base}/api/items`);
      await response.arrayBuffer();
      expect(response.status).toBe(200);
    }
    const health = await (await fetch(`${served.admin}/healthz`)).text();
    const snapshot = await (await fetch(`${served.admin}/api/snapshot`)).text();
    // The failures were logged (and quoted the answer), with the token hidden.
    const output = served.output();
    expect(output).toContain("authorization=Bearer ***");
    expect(health).toContain("Bearer ***");
    for (const text of [output, health, snapshot]) expect(text).not.toContain(TOKEN);
  });
});
