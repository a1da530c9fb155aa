/**
 * A loopback TCP proxy that holds every chunk for a fixed time in each direction: a server as
 * another region sees it, `delayMs` away each way (a round trip of twice that). It knows
 * nothing of the protocol, so DynamoDB's HTTP and Redis's RESP go through it alike, on the
 * clients' own kept-alive connections.
 *
 * Chunks keep their order: every chunk waits the same time, and Node runs timers of one
 * duration in the order they were set. A new connection costs no delay of its own (its
 * handshake happens on loopback): the stores under test open theirs before they count.
 */
import { connect, createServer, type Socket } from "node:net";

export interface DelayProxy {
  readonly port: number;
  /** `host:port`, to put in a URL. */
  readonly address: string;
  close(): Promise<void>;
}

export async function startDelayProxy(targetPort: number, delayMs: number): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    track(client);
    track(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    relay(client, upstream, delayMs);
    relay(upstream, client, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    port,
    address: `127.0.0.1:${port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What `from` sends reaches `to` `delayMs` later; its end and its failure too. */
function relay(from: Socket, to: Socket, delayMs: number): void {
  from.on("data", (chunk) => {
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, delayMs);
  });
  from.on("end", () => {
    setTimeout(() => {
      if (!to.destroyed) to.end();
    }, delayMs);
  });
  // An error closes the socket; the other side learns of it as a peer would, a delay later.
  from.on("error", () => {});
  from.on("close", () => {
    setTimeout(() => to.destroy(), delayMs);
  });
}
