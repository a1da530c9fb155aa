/**
 * Closing a Node server without cutting what it is answering: the gateway's public port, the
 * rate limit service's HTTP port and the admin listener all stop the same way.
 */
import type { Server, ServerResponse } from "node:http";

/** The requests a server is answering, each counted from its arrival until its response closes. */
export class RequestsInFlight {
  #count = 0;
  /** Who waits for the count to reach 0: only `drainAndClose`, once per close. */
  #idle: (() => void)[] = [];

  get count(): number {
    return this.#count;
  }

  /** Counts one request until its response closes (answered, or the client gone). */
  track(response: ServerResponse): void {
    this.#count++;
    response.once("close", () => {
      this.#count--;
      if (this.#count > 0) return;
      const waiting = this.#idle;
      this.#idle = [];
      for (const resolve of waiting) resolve();
    });
  }

  /** Resolves once no request is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}

/**
 * Stops accepting connections and closes the idle keep-alive ones at once (a client would
 * otherwise hold the server open until its keep-alive timeout), lets the requests in flight
 * finish for at most `graceMs`, then cuts every connection left and resolves when the server
 * is closed. Without `requests` nothing is waited for: every connection is cut at once (the
 * admin listener, whose dashboards hold a stream open for good).
 */
export async function drainAndClose(
  server: Server,
  requests: RequestsInFlight | undefined,
  graceMs: number,
): Promise<void> {
  const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  if (requests !== undefined && requests.count > 0) {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([requests.idle(), bound]);
    clearTimeout(timer);
  }
  server.closeAllConnections();
  await stopped;
}
