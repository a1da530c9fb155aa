import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll } from "vitest";

/**
 * Servers on free loopback ports for one test file, all closed after it: `listen(server)`
 * resolves to the server's base URL.
 */
export function loopbackServers(): (server: Server) => Promise<string> {
  const servers: { close(): unknown }[] = [];
  afterAll(() => {
    for (const server of servers) server.close();
  });
  return async (server) => {
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
}
