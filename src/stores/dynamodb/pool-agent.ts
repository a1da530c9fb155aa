/**
 * The Agent the pool sends through: Node's keep-alive Agent, with a socket opened ahead of the
 * first request (`preconnect`), a record of which sockets have finished their handshake, and
 * idle sockets that receive bytes destroyed (see `HttpPool`).
 */
import type { Agent, ClientRequest } from "node:http";
import type { Socket } from "node:net";

export type HttpModule = typeof import("node:http") | typeof import("node:https");

/** What the pool adds to an Agent: a socket opened ahead, and knowing when a handshake is done. */
export interface PoolAgent extends Agent {
  /** Opens a socket for the next connection the Agent makes, unless one is waiting already. */
  preconnect(options: object): void;
  /** The socket `preconnect` opened, until a request takes it. */
  readonly preopened: Socket | undefined;
  /** The socket's TCP (and TLS) handshake is done. */
  isReady(socket: Socket): boolean;
}

export function createAgent(
  module: HttpModule,
  secure: boolean,
  maxSockets: number,
  ca: string | Buffer | undefined,
): PoolAgent {
  const ready = new WeakSet<Socket>();
  const watch = (socket: Socket, secure: boolean): Socket => {
    socket.setNoDelay(true);
    socket.once(secure ? "secureConnect" : "connect", () => ready.add(socket));
    return socket;
  };
  const onIdleData = function (this: Socket): void {
    this.destroy();
  };
  // https.Agent extends http.Agent: the methods overridden here are http.Agent's.
  const Base = module.Agent as typeof import("node:http").Agent;
  class StoreAgent extends Base implements PoolAgent {
    #opened: Socket | undefined;

    get preopened(): Socket | undefined {
      return this.#opened?.destroyed === false ? this.#opened : undefined;
    }

    preconnect(options: object): void {
      if (this.preopened !== undefined) return;
      const socket = super.createConnection(options as never) as Socket;
      watch(socket, secure);
      socket.on("error", () => {
        if (this.#opened === socket) this.#opened = undefined;
      });
      // Like an idle socket of the Agent, it does not keep the process alive.
      socket.unref();
      this.#opened = socket;
    }

    isReady(socket: Socket): boolean {
      return ready.has(socket);
    }

    override createConnection(...args: Parameters<Agent["createConnection"]>) {
      const opened = this.#opened;
      this.#opened = undefined;
      if (opened !== undefined && !opened.destroyed) return opened.ref();
      const socket = super.createConnection(...args);
      return socket === undefined || socket === null ? socket : watch(socket as Socket, secure);
    }

    override keepSocketAlive(socket: Socket): boolean {
      // Typed void in @types/node; Node returns whether the socket may be kept.
      const kept = super.keepSocketAlive(socket) as unknown as boolean;
      if (kept) socket.once("data", onIdleData);
      return kept;
    }

    override reuseSocket(socket: Socket, request: ClientRequest): void {
      socket.off("data", onIdleData);
      super.reuseSocket(socket, request);
    }
  }
  return new StoreAgent({
    keepAlive: true,
    maxSockets,
    scheduling: "lifo",
    ...(ca !== undefined ? { ca } : {}),
  });
}
