/**
 * Next.js middleware that rate-limits the API routes with edgelimit: 30 requests a minute per
 * client address on /api/, 5 on /api/login, in Next's edge runtime.
 *
 * Where the client address comes from. Middleware sees no socket, only headers, and a client
 * can send any header it likes: only a header that the platform or your own proxy sets,
 * replacing whatever the client sent, says who the client is.
 * - On Vercel, `x-real-ip` (Vercel sets VERCEL=1 and that header).
 * - Self-hosted (`next start` behind nginx, Caddy, a load balancer): set
 *   EDGELIMIT_CLIENT_IP_HEADER to the header your proxy sets, such as `x-real-ip` with nginx's
 *   `proxy_set_header X-Real-IP $remote_addr;`, and let clients reach Next only through it.
 *   A request without that header did not come through the proxy: it is refused (400).
 * - Neither: no header is believed. Every request counts as one client (a forged header buys
 *   nothing, and the limit holds for everyone at once), with a warning that says what to set.
 *
 * Where the counters live. With UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN (or Vercel
 * KV's KV_REST_API_URL and KV_REST_API_TOKEN), in that Redis, over HTTP: shared by every
 * instance and every `next start` process. Without, in each instance's memory (`memoryStore`),
 * which limits nothing across instances.
 */
import { createLimiter, definePolicy, memoryStore, type Store } from "edgelimit";
import { describeRequest, refusalResponse } from "edgelimit/fetch";
import { redisRestStore } from "edgelimit/redis-rest";
import { type NextRequest, NextResponse } from "next/server";

const env = process.env;
const clientIpHeader =
  env.EDGELIMIT_CLIENT_IP_HEADER?.toLowerCase() || (env.VERCEL === "1" ? "x-real-ip" : undefined);

function counters(): Store {
  const url = env.UPSTASH_REDIS_REST_URL ?? env.KV_REST_API_URL;
  const token = env.UPSTASH_REDIS_REST_TOKEN ?? env.KV_REST_API_TOKEN;
  return url && token ? redisRestStore({ url, token }) : memoryStore();
}

const limiter = createLimiter({
  policy: definePolicy({
    version: 1,
    identity: {
      // Without a trusted header, the "socket" address, which middleware never has: every
      // request is then counted as ip:unknown, one counter.
      ip:
        clientIpHeader === undefined
          ? { source: "socket" }
          : { source: "header", header: clientIpHeader },
    },
    tiers: { anonymous: { global: 30, paths: { "/api/login": 5 } } },
  }),
  store: counters(),
});

/** At most one warning a minute about the missing configuration, per instance. */
const untrusted = { warnedAt: Number.NEGATIVE_INFINITY, since: 0 };

function warnUntrusted(): void {
  untrusted.since++;
  const now = Date.now();
  if (now - untrusted.warnedAt < 60_000) return;
  console.warn(
    `edgelimit middleware: no trusted client address, so ${untrusted.since} request(s) counted as one client. On Vercel this is automatic; self-hosted, set EDGELIMIT_CLIENT_IP_HEADER to the header your proxy sets (nginx: proxy_set_header X-Real-IP $remote_addr; then EDGELIMIT_CLIENT_IP_HEADER=x-real-ip).`,
  );
  untrusted.warnedAt = now;
  untrusted.since = 0;
}

export async function middleware(request: NextRequest): Promise<Response> {
  if (clientIpHeader === undefined) warnUntrusted();
  else if (!request.headers.get(clientIpHeader)) {
    return Response.json(
      {
        error: "client_address_missing",
        message: `this request has no ${clientIpHeader} header: it did not come through the proxy that sets it`,
      },
      { status: 400 },
    );
  }
  const verdict = await limiter.check(describeRequest(request, undefined));
  if (verdict.action !== "allow") return refusalResponse(verdict);
  // Allowed: the client gets the rate-limit headers on the API route's response.
  return NextResponse.next({ headers: verdict.headers });
}

export const config = { matcher: "/api/:path*" };
