/**
 * Next.js middleware (edge runtime) that rate-limits the API routes with edgelimit: 30 requests
 * a minute per client address on /api/, 5 on /api/login. Counters live in the memory of each
 * edge instance (`memoryStore`); for limits shared by every instance, give `createLimiter` a
 * remote store reachable from the edge (see docs/policy.md).
 *
 * Next's edge runtime bundles this for the browser platform: `edgelimit` and `edgelimit/fetch`
 * import no Node built-ins (test/adapters/nextjs-middleware.test.ts bundles and runs it).
 */
import { createLimiter, definePolicy, memoryStore } from "edgelimit";
import { describeRequest, refusalResponse } from "edgelimit/fetch";
import { type NextRequest, NextResponse } from "next/server";

const limiter = createLimiter({
  policy: definePolicy({
    version: 1,
    // The client address from a header the platform sets and clients cannot (Vercel sets
    // x-real-ip). Self-hosted, have your proxy set it and drop the client's own.
    identity: { ip: { source: "header", header: "x-real-ip" } },
    tiers: { anonymous: { global: 30, paths: { "/api/login": 5 } } },
  }),
  store: memoryStore(),
});

export async function middleware(request: NextRequest): Promise<Response> {
  // The address comes from the x-real-ip header (the policy's identity); the edge runtime
  // gives middleware no socket peer.
  const verdict = await limiter.check(describeRequest(request, undefined));
  if (verdict.action !== "allow") return refusalResponse(verdict);
  // Allowed: the client gets the rate-limit headers on the API route's response.
  return NextResponse.next({ headers: verdict.headers });
}

export const config = { matcher: "/api/:path*" };
