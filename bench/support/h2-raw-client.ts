/**
 * A bare HTTP/2 client for the gRPC load generator: unary calls written as frames straight on
 * a TCP socket, so that the generator spends a few µs a call where node:http2's client spends
 * about what the server does, and keeps its rate on a core it shares.
 *
 * It writes one fixed header block (HPACK literals of static-table names, never indexed, so
 * the server's decoder state never matters) and each call's message in one DATA frame, and
 * reads only the frames' headers: a call succeeded when its stream carried a message (DATA)
 * and then ended. Every error the services measured answer with is "trailers-only" (a HEADERS
 * frame that ends the stream without DATA), so no header needs decoding. It acknowledges the
 * server's SETTINGS and PINGs, opens the connection's receive window wide and keeps it open, and
 * keeps to the server's send window for the connection (each stream sends far below its own).
 */
import { connect, type Socket } from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const TYPE = {
  DATA: 0,
  HEADERS: 1,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
};
const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 };
/** What the connection's receive window is raised to, and re-raised by once half is used. */
const RECEIVE_WINDOW = 1 << 30;

function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const bytes = Buffer.allocUnsafe(9 + payload.length);
  bytes.writeUIntBE(payload.length, 0, 3);
  bytes[3] = type;
  bytes[4] = flags;
  bytes.writeUInt32BE(stream, 5);
  payload.copy(bytes, 9);
  return bytes;
}

/** An HPACK string literal, not Huffman-coded (lengths below 127). */
function literal(text: string): Buffer {
  return Buffer.concat([Buffer.from([text.length]), Buffer.from(text, "latin1")]);
}

/** POST `path` as gRPC: indexed :method POST and :scheme http, the rest literals never indexed. */
function headerBlock(path: string, authority: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x83, 0x86]), // :method POST, :scheme http (static 3 and 6)
    Buffer.from([0x14]), // :path, name static 4, never indexed
    literal(path),
    Buffer.from([0x11]), // :authority, name static 1
    literal(authority),
    Buffer.from([0x1f, 0x10]), // content-type, name static 31
    literal("application/grpc"),
    Buffer.from([0x10]), // te: a new name
    literal("te"),
    literal("trailers"),
  ]);
}

function windowUpdate(stream: number, increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return frame(TYPE.WINDOW_UPDATE, 0, stream, payload);
}

export interface RawH2Client {
  /** Sends one call (`message` with its 5-byte gRPC prefix); `done(true)` once it succeeded. */
  call(message: Buffer, done: (ok: boolean) => void): void;
  close(): void;
}

export async function rawH2Client(port: number, path: string): Promise<RawH2Client> {
  const socket: Socket = connect(port, "127.0.0.1").setNoDelay(true);
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.on("error", () => undefined);
  const block = headerBlock(path, `127.0.0.1:${port}`);
  const pending = new Map<number, { done: (ok: boolean) => void; data: boolean }>();
  let nextStream = 1;
  let sendWindow = 65_535;
  let received = 0;
  const waiting: Buffer[] = [];
  let queued = false;
  const outgoing: Buffer[] = [];
  const flush = (): void => {
    queued = false;
    if (outgoing.length > 0) socket.write(Buffer.concat(outgoing.splice(0)));
  };
  const send = (bytes: Buffer): void => {
    outgoing.push(bytes);
    if (!queued) {
      queued = true;
      queueMicrotask(flush);
    }
  };
  const sendData = (): void => {
    while (waiting.length > 0) {
      const next = waiting[0] as Buffer;
      const length = next.readUIntBE(0, 3);
      if (length > sendWindow) return;
      sendWindow -= length;
      send(waiting.shift() as Buffer);
    }
  };
  const fail = (): void => {
    for (const call of pending.values()) call.done(false);
    pending.clear();
  };
  send(Buffer.concat([PREFACE, frame(TYPE.SETTINGS, 0, 0, Buffer.alloc(0))]));
  send(windowUpdate(0, RECEIVE_WINDOW - 65_535));

  let buffered: Buffer = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    let at = 0;
    while (buffered.length - at >= 9) {
      const length = buffered.readUIntBE(at, 3);
      if (buffered.length - at < 9 + length) break;
      const type = buffered[at + 3] as number;
      const flags = buffered[at + 4] as number;
      const stream = buffered.readUInt32BE(at + 5) & 0x7fff_ffff;
      const payload = buffered.subarray(at + 9, at + 9 + length);
      at += 9 + length;
      if (type === TYPE.DATA || type === TYPE.HEADERS) {
        if (type === TYPE.DATA) received += length;
        const call = pending.get(stream);
        if (call === undefined) continue;
        if (type === TYPE.DATA && length > 0) call.data = true;
        if ((flags & FLAG.END_STREAM) !== 0) {
          pending.delete(stream);
          call.done(call.data);
        }
      } else if (type === TYPE.RST_STREAM) {
        const call = pending.get(stream);
        pending.delete(stream);
        call?.done(false);
      } else if (type === TYPE.SETTINGS && (flags & FLAG.ACK) === 0) {
        send(frame(TYPE.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0)));
      } else if (type === TYPE.PING && (flags & FLAG.ACK) === 0) {
        send(frame(TYPE.PING, FLAG.ACK, 0, Buffer.from(payload)));
      } else if (type === TYPE.WINDOW_UPDATE && stream === 0) {
        sendWindow += payload.readUInt32BE(0) & 0x7fff_ffff;
        sendData();
      } else if (type === TYPE.GOAWAY) fail();
    }
    buffered = at === buffered.length ? Buffer.alloc(0) : buffered.subarray(at);
    if (received > RECEIVE_WINDOW / 2) {
      send(windowUpdate(0, received));
      received = 0;
    }
  });
  socket.on("close", fail);

  return {
    call: (message, done) => {
      const stream = nextStream;
      nextStream += 2;
      pending.set(stream, { done, data: false });
      send(frame(TYPE.HEADERS, FLAG.END_HEADERS, stream, block));
      waiting.push(frame(TYPE.DATA, FLAG.END_STREAM, stream, message));
      sendData();
    },
    close: () => socket.destroy(),
  };
}
