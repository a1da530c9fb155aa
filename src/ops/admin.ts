import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { Logger } from "pino";
import { listen } from "../node-http/listen.js";
import { dashboardPage, dashboardScript } from "./dashboard-page.js";
import type { GatewaySnapshot } from "./snapshot.js";
import type { StoreHealth } from "./store-health.js";

/** What the admin listener shows: the gateway, or the rate limit service (`edgelimit rls`). */
export interface AdminSource {
  storeHealth(): StoreHealth;
  readonly inFlight: number;
  readonly metrics: { readonly contentType: string; text(): Promise<string> };
  snapshot(): GatewaySnapshot;
  readonly logger: Logger;
}

/** Files served under /assets/, from node_modules: the dashboard loads nothing from a CDN. */
const ASSETS: Record<string, { module: string; type: string }> = {
  "/assets/uPlot.iife.min.js": {
    module: "uplot/dist/uPlot.iife.min.js",
    type: "text/javascript; charset=utf-8",
  },
  "/assets/uPlot.min.css": { module: "uplot/dist/uPlot.min.css", type: "text/css; charset=utf-8" },
};

const SSE_INTERVAL_MS = 1_000;
/** Dashboards open at once; more get 503 rather than one timer each without bound. */
const MAX_STREAMS = 32;

/**
 * The admin listener: `/healthz`, `/metrics`, the dashboard at `/` with its live feed at
 * `/events` (server-sent events, one snapshot a second) and `/api/snapshot` for scripts.
 * Bound to loopback by default; it never shares the public port.
 */
export async function startAdmin(source: AdminSource, port: number, host: string): Promise<Server> {
  const require = createRequire(import.meta.url);
  const assetCache = new Map<string, Buffer>();
  let streams = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (req.method !== "GET" && req.method !== "HEAD") {
      send(res, 405, "text/plain; charset=utf-8", "method not allowed\n", { allow: "GET, HEAD" });
      return;
    }
    if (path === "/healthz") {
      send(
        res,
        200,
        "application/json; charset=utf-8",
        JSON.stringify({ ...healthOf(source.storeHealth()), inFlight: source.inFlight }),
      );
      return;
    }
    if (path === "/metrics") {
      send(res, 200, source.metrics.contentType, await source.metrics.text());
      return;
    }
    if (path === "/" || path === "/index.html") {
      send(res, 200, "text/html; charset=utf-8", dashboardPage(source.snapshot()), {
        "content-security-policy":
          "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'",
      });
      return;
    }
    if (path === "/assets/dashboard.js") {
      send(res, 200, "text/javascript; charset=utf-8", dashboardScript());
      return;
    }
    if (path === "/api/snapshot") {
      send(res, 200, "application/json; charset=utf-8", JSON.stringify(source.snapshot()));
      return;
    }
    if (path === "/events") {
      if (streams >= MAX_STREAMS) {
        send(res, 503, "text/plain; charset=utf-8", "too many dashboards open\n");
        return;
      }
      streams++;
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-store",
        connection: "keep-alive",
      });
      const push = () => res.write(`data: ${JSON.stringify(source.snapshot())}\n\n`);
      push();
      const timer = setInterval(push, SSE_INTERVAL_MS);
      res.once("close", () => {
        clearInterval(timer);
        streams--;
      });
      return;
    }
    const asset = ASSETS[path];
    if (asset !== undefined) {
      let content = assetCache.get(path);
      if (content === undefined) {
        content = await readFile(require.resolve(asset.module));
        assetCache.set(path, content);
      }
      send(res, 200, asset.type, content, { "cache-control": "max-age=3600" });
      return;
    }
    send(res, 404, "text/plain; charset=utf-8", "not found\n");
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      source.logger.error({ msg: "admin request failed", err: error });
      if (!res.headersSent) send(res, 500, "text/plain; charset=utf-8", "admin error\n");
      else res.destroy();
    });
  });
  await listen(server, port, host);
  return server;
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": String(Buffer.byteLength(body)),
    "x-content-type-options": "nosniff",
    ...extra,
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

/**
 * `/healthz`: 200 while the server answers. A failing store makes it `degraded`, not down:
 * the server still decides, with the rules' fail modes, and restarting it would not help.
 */
function healthOf(store: StoreHealth): { status: "ok" | "degraded"; store: StoreHealth } {
  return { status: store.state, store };
}
