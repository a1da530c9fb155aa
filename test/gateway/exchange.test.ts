import { request as httpRequest, type IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/server.js";
import { startOrigin, type TestServer, testGateway } from "./helpers.js";

/**
 * The proxy's upstream exchange (undici dispatch with a handler): a client that goes away
 * cancels the upstream request, and a client that reads slowly slows the upstream down.
 */
let origin: TestServer;
let gateway: Gateway;
let base: URL;
/** Per test: when the origin saw its response closed, and how many bytes it managed to write. */
const endless = { closedAt: 0, written: 0, finished: false };

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    if (req.url === "/endless") {
      endless.closedAt = 0;
      endless.written = 0;
      endless.finished = false;
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 1);
      // Writes as fast as the socket takes it, until 64 MB or the connection is gone.
      const pump = () => {
        while (endless.written < 64 * 1024 * 1024) {
          endless.written += chunk.length;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        endless.finished = true;
        res.end();
      };
      res.on("close", () => {
        endless.closedAt = Date.now();
      });
      pump();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok");
  });
  gateway = testGateway(origin.url, { adminPort: false, allowedLogSampleRate: 0 });
  base = new URL((await gateway.start()).url);
});

afterAll(async () => {
  await gateway?.close();
  await origin?.close();
});

function open(path: string, ip: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: "127.0.0.1",
      port: Number(base.port),
      path,
      headers: { "x-forwarded-for": ip },
    });
    req.on("response", resolve);
    req.on("error", reject);
    req.end();
  });
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("the upstream exchange", () => {
  it("holds the origin back while the client does not read, then streams everything", async () => {
    const response = await open("/endless", "198.51.100.40");
    response.pause();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const writtenWhilePaused = endless.written;
    await new Promise((resolve) => setTimeout(resolve, 700));
    // Socket buffers on both hops fill up, then the origin stalls: nothing more is written.
    expect(endless.written).toBe(writtenWhilePaused);
    expect(endless.finished).toBe(false);
    expect(endless.written).toBeLessThan(32 * 1024 * 1024);
    let received = 0;
    response.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    response.resume();
    await new Promise((resolve) => response.on("end", resolve));
    expect(received).toBe(64 * 1024 * 1024);
    expect(endless.finished).toBe(true);
  });

  it("cancels the upstream request when the client goes away mid-response", async () => {
    const response = await open("/endless", "198.51.100.41");
    await new Promise((resolve) => response.once("data", resolve));
    response.destroy();
    await until(() => endless.closedAt > 0, "the origin to see its response closed");
    expect(endless.finished).toBe(false);
    await until(() => gateway.inFlight === 0, "the gateway to finish the request");
    // The gateway keeps serving.
    const after = await fetch(new URL("/", base), {
      headers: { "x-forwarded-for": "198.51.100.42" },
    });
    expect(await after.text()).toBe("ok");
  });
});
