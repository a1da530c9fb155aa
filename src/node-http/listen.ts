import type { Server } from "node:http";

/** Binds a server; rejects with the bind's error (the port taken, say) instead of throwing later. */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
}

/** A host as it stands in a URL: an IPv6 address in brackets. */
export function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
