import { connect as connectTcp, type Socket } from "node:net";

export type TlsModule = typeof import("node:tls");

export interface SocketTarget {
  readonly host: string;
  readonly port: number;
  /** Roots trusted instead of Node's bundled ones (a test server's certificate). */
  readonly ca: string | Buffer | undefined;
}

/**
 * A TCP socket, or a TLS one when `tls` is given (SNI with the host name, never an address
 * literal; Node's default verification of the chain and the host name). Emits `connect`
 * (plain) or `secureConnect` (TLS) once its handshake is done.
 */
export function openSocket(target: SocketTarget, tls: TlsModule | undefined): Socket {
  const socket =
    tls === undefined
      ? connectTcp({ host: target.host, port: target.port, noDelay: true })
      : tls.connect({
          host: target.host,
          port: target.port,
          ...(isAddress(target.host) ? {} : { servername: target.host }),
          ...(target.ca !== undefined ? { ca: target.ca } : {}),
        });
  if (tls !== undefined) socket.setNoDelay(true);
  socket.setKeepAlive(true, 1000);
  return socket;
}

/**
 * `node:tls` costs a fresh process a few ms: loaded by the first https connection only. Gives
 * the module itself once loaded, so that later connections open synchronously.
 */
export class TlsLoader {
  #tls: TlsModule | Promise<TlsModule> | undefined;

  load(): TlsModule | Promise<TlsModule> {
    this.#tls ??= import("node:tls").then((loaded) => {
      this.#tls = loaded;
      return loaded;
    });
    return this.#tls;
  }
}

function isAddress(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(":");
}
