import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { DynamoDbHttpClient } from "../../src/stores/dynamodb/client.js";
import { HttpPool, MAX_HEAD_BYTES } from "../../src/stores/dynamodb/http-pool.js";
import { selfSignedCertificate } from "../support/tls.js";
import { TEST_CREDENTIALS } from "./harness.js";

interface ReceivedRequest {
  readonly socket: Socket;
  /** 1-based: which connection the server accepted it on. */
  readonly connection: number;
  /** 1-based, over the whole server. */
  readonly index: number;
  /** 1-based, within its connection. */
  readonly onConnection: number;
  readonly head: string;
  readonly body: string;
}

interface RawServer {
  readonly origin: URL;
  readonly requests: ReceivedRequest[];
  /** Connections accepted so far. */
  connections(): number;
  /** Connections the server saw close (destroyed by either side). */
  closed(): number;
  close(): Promise<void>;
}

const servers: Server[] = [];
const pools: HttpPool[] = [];

afterEach(() => {
  for (const pool of pools.splice(0)) pool.close();
});

afterAll(async () => {
  for (const server of servers.splice(0)) await stop(server);
});

async function stop(server: Server): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * A loopback server that reads whole requests (head, then a Content-Length body) and lets the
 * test answer each with whatever bytes it likes.
 */
async function rawServer(
  answer: (request: ReceivedRequest) => void,
  secure?: { key: string; cert: string },
): Promise<RawServer> {
  const requests: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  let closed = 0;
  const onConnection = (socket: Socket): void => {
    const connection = ++connections;
    let perConnection = 0;
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on("close", () => {
      closed++;
      sockets.delete(socket);
    });
    socket.on("error", () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on("data", (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      for (;;) {
        const end = buffered.indexOf("\r\n\r\n");
        if (end === -1) return;
        const head = buffered.toString("latin1", 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.toString("utf8", end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        const request = {
          socket,
          connection,
          index: requests.length + 1,
          onConnection: ++perConnection,
          head,
          body,
        };
        requests.push(request);
        answer(request);
      }
    });
  };
  const server = secure
    ? createTlsServer(secure, (socket) => onConnection(socket))
    : createServer(onConnection);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: new URL(`${secure ? "https" : "http"}://127.0.0.1:${port}`),
    requests,
    connections: () => connections,
    closed: () => closed,
    async close() {
      for (const socket of sockets) socket.destroy();
      servers.splice(servers.indexOf(server), 1);
      await stop(server);
    },
  };
}

function ok(body: string, extra = ""): string {
  return `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function pool(origin: URL, options: { maxSockets?: number; maxBodyBytes?: number } = {}) {
  const created = new HttpPool({ origin, ...options });
  pools.push(created);
  return created;
}

function post(target: HttpPool, body = "{}", timeoutMs = 2000) {
  return target.post(
    "/",
    { host: "127.0.0.1", "content-length": String(Buffer.byteLength(body)) },
    body,
    timeoutMs,
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await sleep(5);
  expect(condition()).toBe(true);
}

describe("HttpPool over real loopback sockets", () => {
  it("reassembles one response written in as many TCP packets as it has bytes", async () => {
    const response = Buffer.from(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n",
    );
    const server = await rawServer(async ({ socket }) => {
      for (const byte of response) {
        socket.write(Buffer.from([byte]));
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    const client = pool(server.origin);
    expect((await post(client)).body.toString()).toBe("abc");
    expect((await post(client)).body.toString()).toBe("abc");
    expect(server.connections()).toBe(1);
  });

  it("answers each request right with the response split at every byte boundary", async () => {
    const text = ok('{"ConsumedCapacity":1}');
    const server = await rawServer(async ({ socket, onConnection }) => {
      const split = onConnection % text.length;
      socket.write(text.slice(0, split));
      await sleep(1);
      socket.write(text.slice(split));
    });
    const client = pool(server.origin);
    for (let i = 0; i < text.length; i++) {
      const response = await post(client);
      expect(response.body.toString()).toBe('{"ConsumedCapacity":1}');
    }
    // One keep-alive socket carried every request.
    expect(server.connections()).toBe(1);
  });

  it("never hands a stray second response to the next request", async () => {
    const server = await rawServer(({ socket, index }) => {
      socket.write(index === 1 ? ok("1") + ok("stray") : ok(String(index)));
    });
    const client = pool(server.origin);
    expect((await post(client)).body.toString()).toBe("1");
    expect((await post(client)).body.toString()).toBe("2");
    expect(server.connections()).toBe(2);
  });

  it("skips 100 Continue, in its own packet or with the answer", async () => {
    const server = await rawServer(async ({ socket, index }) => {
      if (index === 1) {
        socket.write("HTTP/1.1 100 Continue\r\n\r\n");
        await sleep(2);
        socket.write(ok("after-continue"));
      } else {
        socket.write(`HTTP/1.1 100 Continue\r\nX: y\r\n\r\n${ok("same-packet")}`);
      }
    });
    const client = pool(server.origin);
    expect((await post(client)).body.toString()).toBe("after-continue");
    expect((await post(client)).body.toString()).toBe("same-packet");
    expect(server.connections()).toBe(1);
  });

  it("honours Connection: close, and reads a body without length until the server closes", async () => {
    const server = await rawServer(({ socket, index }) => {
      if (index === 1) socket.end(ok("closing", "Connection: close\r\n"));
      else socket.end(`HTTP/1.1 200 OK\r\n\r\nuntil-close-${index}`);
    });
    const client = pool(server.origin);
    expect((await post(client)).body.toString()).toBe("closing");
    expect((await post(client)).body.toString()).toBe("until-close-2");
    expect((await post(client)).body.toString()).toBe("until-close-3");
    expect(server.connections()).toBe(3);
    expect(server.requests).toHaveLength(3);
  });

  it("does not reuse a socket the server closed while it was idle", async () => {
    const server = await rawServer(({ socket, index }) => {
      socket.write(ok(String(index)));
      setTimeout(() => socket.end(), 10);
    });
    const client = pool(server.origin);
    expect((await post(client)).body.toString()).toBe("1");
    await until(() => client.openSockets === 0);
    expect((await post(client)).body.toString()).toBe("2");
    // Exactly two requests: the second went straight to a new socket, nothing was resent.
    expect(server.requests.map((request) => request.connection)).toEqual([1, 2]);
  });

  for (const how of ["end", "reset"] as const) {
    it(`resends once, on a new socket, a request whose reused socket ${how === "end" ? "ends" : "is reset"} before any answer`, async () => {
      const server = await rawServer(({ socket, onConnection, index }) => {
        // The race a keep-alive client cannot avoid: the server drops an idle connection just
        // as the next request arrives on it.
        if (onConnection === 2) {
          if (how === "end") socket.destroy();
          else socket.resetAndDestroy();
          return;
        }
        socket.write(ok(String(index)));
      });
      const client = pool(server.origin);
      expect((await post(client)).body.toString()).toBe("1");
      expect((await post(client)).body.toString()).toBe("3");
      expect(server.requests.map((request) => request.connection)).toEqual([1, 1, 2]);
    });
  }

  it("does not resend a request marked as unsafe to repeat (a refund)", async () => {
    const server = await rawServer(({ socket, onConnection, index }) => {
      if (onConnection === 2) socket.destroy();
      else socket.write(ok(String(index)));
    });
    const client = pool(server.origin);
    await post(client);
    const body = "{}";
    const headers = { host: "127.0.0.1", "content-length": "2" };
    await expect(client.post("/", headers, body, 2000, false)).rejects.toThrow(
      /closed before any answer/,
    );
    expect(server.requests).toHaveLength(2);
  });

  it("never resends on a fresh socket, nor after any byte of the answer", async () => {
    const fresh = await rawServer(({ socket }) => socket.destroy());
    await expect(post(pool(fresh.origin))).rejects.toMatchObject({ code: "EL_STORE_FAILED" });
    expect(fresh.requests).toHaveLength(1);

    const halfAnswered = await rawServer(({ socket, onConnection }) => {
      if (onConnection === 1) socket.write(ok("1"));
      else socket.end("HTTP/1.1 200 OK\r\nContent-Le");
    });
    const client = pool(halfAnswered.origin);
    await post(client);
    await expect(post(client)).rejects.toThrow(/closed in the middle of a response/);
    expect(halfAnswered.requests).toHaveLength(2);
  });

  it("fails malformed answers clearly, closes their socket, and recovers on a new one", async () => {
    const answers = [
      "HTTP/1.1 OK 200\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnope\r\n",
      `HTTP/1.1 200 OK\r\nX-Big: ${"b".repeat(MAX_HEAD_BYTES + 10)}\r\n\r\n`,
      "HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n",
      ok("fine"),
    ];
    const server = await rawServer(({ socket, index }) => socket.write(answers[index - 1] ?? ""));
    const client = pool(server.origin, { maxBodyBytes: 32 });
    await expect(post(client)).rejects.toThrow(/malformed HTTP response: .*status/i);
    await expect(post(client)).rejects.toThrow(/malformed HTTP response: .*chunk size/i);
    await expect(post(client)).rejects.toThrow(/header section over 65536 bytes/);
    await expect(post(client)).rejects.toThrow(/body over 32 bytes/);
    expect((await post(client)).body.toString()).toBe("fine");
    expect(server.connections()).toBe(5);
    await until(() => server.closed() >= 4);
  });

  it("times out a server that never answers, and destroys the socket", async () => {
    const server = await rawServer(() => {
      // Reads the request and never answers.
    });
    const client = pool(server.origin);
    const started = performance.now();
    await expect(post(client, "{}", 150)).rejects.toMatchObject({ code: "EL_STORE_TIMEOUT" });
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(140);
    expect(elapsed).toBeLessThan(1500);
    await until(() => server.closed() === 1);
    expect(client.openSockets).toBe(0);

    const dynamo = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: server.origin.href,
      credentials: TEST_CREDENTIALS,
      requestTimeoutMs: 100,
    });
    try {
      await expect(dynamo.call("UpdateItem", {})).rejects.toMatchObject({
        code: "EL_STORE_TIMEOUT",
        message: expect.stringMatching(/^DynamoDB UpdateItem timed out/),
      });
    } finally {
      dynamo.close();
    }
  });

  it("fails calls in flight and waiting on close, then serves new calls on new sockets", async () => {
    let answering = false;
    const server = await rawServer(({ socket, index }) => {
      if (answering) socket.write(ok(String(index)));
    });
    const client = pool(server.origin, { maxSockets: 1 });
    const inFlight = post(client);
    const waiting = post(client);
    await until(() => server.requests.length === 1);
    client.close();
    await expect(inFlight).rejects.toThrow(/connection closed/);
    await expect(waiting).rejects.toThrow(/client closed/);
    expect(client.openSockets).toBe(0);
    answering = true;
    expect((await post(client)).body.toString()).toBe("2");
    expect(server.connections()).toBe(2);
  });

  it("keeps at most maxSockets open and reuses idle ones", async () => {
    const server = await rawServer(({ socket, index }) => {
      setTimeout(() => socket.write(ok(String(index))), 5);
    });
    const client = pool(server.origin, { maxSockets: 2 });
    const bodies = await Promise.all(
      Array.from({ length: 12 }, async () => (await post(client)).body.toString()),
    );
    expect(bodies.map(Number).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    expect(server.connections()).toBe(2);
    expect(client.openSockets).toBe(2);
  });
});

describe("connection setup", () => {
  it("opens a socket ahead with preconnect, which the first call then uses", async () => {
    const server = await rawServer(({ socket, index }) => socket.write(ok(String(index))));
    const client = pool(server.origin);
    client.preconnect();
    client.preconnect();
    await until(() => server.connections() === 1 && client.openSockets === 1);
    expect((await post(client)).body.toString()).toBe("1");
    expect(server.connections()).toBe(1);
  });

  const directory = mkdtempSync(join(tmpdir(), "edgelimit-setup-"));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it("reports a new socket's TLS handshake to progress, and times the answer from its end", async () => {
    const credentials = selfSignedCertificate(directory, "IP:127.0.0.1");
    const tlsServer = await rawServer(
      ({ socket, index }) => socket.write(ok(String(index))),
      credentials,
    );
    // Holds the server's first bytes (its ServerHello) back, so every handshake takes 200 ms.
    const slow = createServer((client) => {
      const upstream = connect(Number(tlsServer.origin.port), "127.0.0.1");
      client.pipe(upstream);
      const opened = Date.now();
      upstream.on("data", (data) => {
        const wait = opened + 200 - Date.now();
        if (wait <= 0) client.write(data);
        else setTimeout(() => client.write(data), wait);
      });
      upstream.on("end", () => client.end());
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
    servers.push(slow);
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const origin = new URL(`https://127.0.0.1:${(slow.address() as AddressInfo).port}`);
    const client = new HttpPool({ origin, ca: credentials.cert });
    pools.push(client);
    const events: string[] = [];
    const progress = {
      connecting() {
        events.push("connecting");
        return () => events.push("connected");
      },
    };
    const headers = { host: origin.host, "content-length": "2" };
    const started = performance.now();
    // A 100 ms timeout: the 200 ms handshake is not part of it.
    const first = await client.post("/", headers, "{}", 100, true, progress);
    expect(first.body.toString()).toBe("1");
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(events).toEqual(["connecting", "connected"]);
    // A kept-alive socket has no setup to report.
    expect((await client.post("/", headers, "{}", 100, true, progress)).body.toString()).toBe("2");
    expect(events).toEqual(["connecting", "connected"]);
  });
});

describe("TLS", () => {
  it("fails a call, without opening a socket, when the CA given is not a certificate", async () => {
    const client = new HttpPool({
      origin: new URL("https://localhost:1"),
      ca: "not a certificate",
    });
    pools.push(client);
    await expect(post(client)).rejects.toMatchObject({ code: "EL_STORE_FAILED" });
    expect(client.openSockets).toBe(0);
  });

  const directory = mkdtempSync(join(tmpdir(), "edgelimit-tls-"));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  function selfSigned(): { key: string; cert: string } {
    return selfSignedCertificate(directory, "DNS:localhost");
  }

  it("verifies the certificate and the host name, and sends SNI", async () => {
    const credentials = selfSigned();
    const names: (string | false | null)[] = [];
    const server = await rawServer(({ socket }) => {
      names.push((socket as TLSSocket).servername);
      socket.write(ok('{"TableNames":["rate-limits"]}'));
    }, credentials);
    const byName = `https://localhost:${server.origin.port}`;
    const trusted = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: byName,
      credentials: TEST_CREDENTIALS,
      ca: credentials.cert,
    });
    const untrusted = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: byName,
      credentials: TEST_CREDENTIALS,
    });
    // The certificate names localhost, not 127.0.0.1.
    const wrongName = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: server.origin.href,
      credentials: TEST_CREDENTIALS,
      ca: credentials.cert,
    });
    try {
      expect(await trusted.call("ListTables", {})).toEqual({ TableNames: ["rate-limits"] });
      expect(await trusted.call("ListTables", {})).toEqual({ TableNames: ["rate-limits"] });
      expect(names).toEqual(["localhost", "localhost"]);
      expect(server.connections()).toBe(1);
      await expect(untrusted.call("ListTables", {})).rejects.toThrow(/self.signed certificate/i);
      await expect(wrongName.call("ListTables", {})).rejects.toThrow(/altnames|IP: 127\.0\.0\.1/);
      expect(server.requests).toHaveLength(2);
    } finally {
      for (const client of [trusted, untrusted, wrongName]) client.close();
    }
  });
});
