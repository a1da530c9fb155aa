/**
 * A loopback TCP listener that stands for the network between a store client and its server:
 * it accepts every connection and then either says nothing at all (a server that accepted and
 * stays silent, a proxy that lost its backend, a TLS endpoint that never answers the handshake)
 * or forwards it to a real server on loopback. `freeze()` stops every forwarded connection in
 * both directions without closing it: the half-open socket a failover leaves behind, which no
 * reset ever ends. Bounded: at most `maxConnections` held; more are refused.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface Switchboard {
  readonly port: number;
  /** Connections accepted since start. */
  readonly accepted: number;
  /** Connections open now (held silent or forwarded). */
  readonly open: number;
  /** New connections from now on: held silent (undefined) or forwarded to this port. */
  forwardTo(port: number | undefined): void;
  /** Every connection open now stops carrying bytes, both ways, and stays open. */
  freeze(): void;
  close(): Promise<void>;
}

export async function startSwitchboard(maxConnections = 256): Promise<Switchboard> {
  let target: number | undefined;
  let accepted = 0;
  const open = new Set<Socket>();
  const frozen = new Set<Socket>();
  const pairs: [Socket, Socket][] = [];
  const server: Server = createServer((client) => {
    if (open.size >= maxConnections) {
      client.destroy();
      return;
    }
    accepted++;
    open.add(client);
    client.on("error", () => {});
    client.on("close", () => open.delete(client));
    if (target === undefined) {
      // Read and drop what the client sends, answer nothing.
      client.on("data", () => {});
      return;
    }
    const upstream = createConnection(target, "127.0.0.1");
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => {
      if (!frozen.has(client)) client.destroy();
    });
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push([client, upstream]);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    get accepted() {
      return accepted;
    },
    get open() {
      return open.size;
    },
    forwardTo(next) {
      target = next;
    },
    freeze() {
      for (const [client, upstream] of pairs.splice(0)) {
        frozen.add(client);
        client.unpipe(upstream);
        upstream.unpipe(client);
        // Whatever either side sends from now on is read and dropped.
        client.on("data", () => {});
        upstream.destroy();
      }
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
