import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT } from "jose";
import { listen } from "../node-http/listen.js";

export interface DemoOrigin {
  readonly url: string;
  close(): Promise<void>;
}

/** A random HS256 secret for one demo session. */
export function demoSecret(): string {
  return randomBytes(32).toString("base64url");
}

/**
 * DEMO ONLY. A tiny origin for `edgelimit serve --demo` (and `npm start`): it answers every path
 * with JSON that shows what the gateway forwarded, and mints test tokens at
 * `/demo/token?sub=u1&plan=pro` with the session's secret. A real deployment never has an
 * endpoint that hands out tokens to anyone who asks.
 */
export async function startDemoOrigin(options: {
  readonly jwtSecret: string | undefined;
  readonly originHeader: string;
}): Promise<DemoOrigin> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://demo.invalid");
    if (url.pathname === "/demo/token") {
      if (options.jwtSecret === undefined) {
        res.writeHead(404, { "content-type": "application/json; charset=utf-8" });
        res.end(
          JSON.stringify({
            error: "no_demo_secret",
            message: "The policy's JWT secret was set by you, so the demo does not mint tokens.",
          }),
        );
        return;
      }
      const sub = url.searchParams.get("sub") ?? "demo-user";
      const plan = url.searchParams.get("plan") ?? "free";
      void new SignJWT({ plan })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(sub)
        .setIssuedAt()
        .setExpirationTime("1h")
        .sign(new TextEncoder().encode(options.jwtSecret))
        .then((token) => {
          res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
          res.end(JSON.stringify({ demoOnly: true, sub, plan, expiresIn: 3600, token }));
        });
      return;
    }
    let received = 0;
    req.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
      res.end(
        `${JSON.stringify({
          origin: "edgelimit demo origin",
          method: req.method,
          path: url.pathname,
          query: url.search,
          bodyBytes: received,
          forwardedFor: req.headers["x-forwarded-for"],
          remainingSeenByOrigin: req.headers[options.originHeader.toLowerCase()],
        })}\n`,
      );
    });
  });
  await listen(server, 0, "127.0.0.1");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
