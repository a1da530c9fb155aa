/**
 * A bare HTTP/1.1 client for the load generator's `/check` calls: keep-alive connections, one
 * request in flight on each (as nginx's `auth_request` subrequests keep them), requests written
 * as pre-built text and answers read no further than their status line and `content-length`.
 * A call was answered as it should be on 2xx, or on a refusal (401, 403, 429).
 */
import { connect, type Socket } from "node:net";

export interface RawHttp1Client {
  call(request: Buffer, done: (ok: boolean) => void): void;
  close(): void;
}

interface Connection {
  readonly socket: Socket;
  done: ((ok: boolean) => void) | undefined;
}

export async function rawHttp1Client(port: number, connections: number): Promise<RawHttp1Client> {
  const idle: Connection[] = [];
  const backlog: { request: Buffer; done: (ok: boolean) => void }[] = [];
  const all: Connection[] = [];
  const send = (connection: Connection, request: Buffer, done: (ok: boolean) => void): void => {
    connection.done = done;
    connection.socket.write(request);
  };
  for (let i = 0; i < connections; i++) {
    const socket = connect(port, "127.0.0.1").setNoDelay(true);
    await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const connection: Connection = { socket, done: undefined };
    all.push(connection);
    let pending: Buffer = Buffer.alloc(0);
    socket.on("error", () => undefined);
    socket.on("close", () => connection.done?.(false));
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        const headEnd = pending.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        const head = pending.toString("latin1", 0, headEnd);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        const end = headEnd + 4 + length;
        if (pending.length < end) return;
        pending = pending.subarray(end);
        const done = connection.done;
        connection.done = undefined;
        const next = backlog.shift();
        if (next !== undefined) send(connection, next.request, next.done);
        else idle.push(connection);
        const status = head.slice(9, 12);
        done?.(status.startsWith("2") || status === "401" || status === "403" || status === "429");
      }
    });
    idle.push(connection);
  }
  return {
    call: (request, done) => {
      const connection = idle.pop();
      if (connection === undefined) backlog.push({ request, done });
      else send(connection, request, done);
    },
    close: () => {
      for (const connection of all) connection.socket.destroy();
    },
  };
}
