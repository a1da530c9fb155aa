import { once } from "node:events";
import { Agent, createServer, get, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { drainAndClose, RequestsInFlight } from "../../src/node-http/drain.js";

/** A server whose `/slow` answers when `release()` is called, and whose `/hang` never does. */
async function slowServer(): Promise<{
  server: Server;
  requests: RequestsInFlight;
  url: string;
  release(): void;
}> {
  const requests = new RequestsInFlight();
  const waiting: (() => void)[] = [];
  // A long keep-alive: an idle connection that closes here was closed by the drain, not by time.
  const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
    requests.track(res);
    if (req.url === "/slow") waiting.push(() => res.end("done"));
    else if (req.url !== "/hang") res.end("quick");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const release = () => {
    for (const end of waiting.splice(0)) end();
  };
  return { server, requests, url, release };
}

function fetchText(url: string, agent?: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    }).on("error", reject);
  });
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.closeAllConnections();
});

describe("drainAndClose", () => {
  it("lets a request in flight finish, then closes", async () => {
    const { server, requests, url, release } = await slowServer();
    servers.push(server);
    const answer = fetchText(`${url}/slow`);
    await until(() => requests.count === 1, "the request to arrive");

    let closed = false;
    const closing = drainAndClose(server, requests, 60_000).then(() => {
      closed = true;
    });
    // Closing stops new connections at once, while the one in flight waits for its answer.
    await expect(fetchText(`${url}/quick`)).rejects.toThrow(/ECONNREFUSED/);
    expect(closed).toBe(false);

    release();
    expect(await answer).toEqual({ status: 200, body: "done" });
    await closing;
    expect(requests.count).toBe(0);
  });

  it("closes idle keep-alive connections at once instead of waiting for their timeout", async () => {
    const { server, requests, url } = await slowServer();
    servers.push(server);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect(await fetchText(`${url}/quick`, agent)).toEqual({ status: 200, body: "quick" });
    const idle = Object.values(agent.freeSockets).flat()[0];
    expect(idle).toBeDefined();
    const socketClosed = once(idle as NonNullable<typeof idle>, "close");

    const started = Date.now();
    await drainAndClose(server, requests, 60_000);
    await socketClosed;
    // Far below both the server's keep-alive (120 s) and the grace period (60 s).
    expect(Date.now() - started).toBeLessThan(20_000);
    agent.destroy();
  });

  it("waits no longer than the grace period for a request that never finishes", async () => {
    const { server, requests, url } = await slowServer();
    servers.push(server);
    const answer = fetchText(`${url}/hang`);
    await until(() => requests.count === 1, "the request to arrive");

    const graceMs = 300;
    const started = process.hrtime.bigint();
    await drainAndClose(server, requests, graceMs);
    const waitedMs = Number(process.hrtime.bigint() - started) / 1e6;
    // A timer fires no earlier than its delay (give 1 ms for rounding); a busy machine may fire
    // it late, but not by the 60 s a wait without bound would take here.
    expect(waitedMs).toBeGreaterThanOrEqual(graceMs - 1);
    expect(waitedMs).toBeLessThan(20_000);
    await expect(answer).rejects.toThrow(/socket hang up|ECONNRESET/);
    await until(() => requests.count === 0, "the cut response to close");
  });

  it("cuts every connection at once when it is given no requests to wait for", async () => {
    const { server, requests, url } = await slowServer();
    servers.push(server);
    const answer = fetchText(`${url}/hang`);
    await until(() => requests.count === 1, "the request to arrive");

    const started = Date.now();
    await drainAndClose(server, undefined, 60_000);
    expect(Date.now() - started).toBeLessThan(20_000);
    await expect(answer).rejects.toThrow(/socket hang up|ECONNRESET/);
  });

  it("counts a request until its response closes, and is idle at once when none is in flight", async () => {
    const { server, requests, url, release } = await slowServer();
    servers.push(server);
    await requests.idle();
    const answer = fetchText(`${url}/slow`);
    await until(() => requests.count === 1, "the request to arrive");
    let idle = false;
    const waiting = requests.idle().then(() => {
      idle = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(idle).toBe(false);
    release();
    await answer;
    await waiting;
    expect(requests.count).toBe(0);
    await drainAndClose(server, requests, 1_000);
  });
});
