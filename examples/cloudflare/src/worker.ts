/**
 * Seed 003 on Workers: examples/policies/workers.yaml in front of a trivial origin.
 * Built by `npm run build:cloudflare`, which replaces EDGELIMIT_POLICY with the resolved policy
 * (JSON), so no YAML parser ships in the Worker. In your own Worker import "edgelimit/cloudflare".
 */
import {
  createCloudflareHandler,
  EdgelimitCounter,
} from "../../../src/adapters/cloudflare/index.js";
import type { ResolvedPolicy } from "../../../src/policy/types.js";

declare const EDGELIMIT_POLICY: ResolvedPolicy;

// The Durable Object class must be exported by the main module for its binding to find it.
export { EdgelimitCounter };

export default createCloudflareHandler({
  policy: EDGELIMIT_POLICY,
  // One binding per operation (wrangler.toml [[ratelimits]]): login never spends the API's budget.
  ratelimits: { login: "LIMIT_LOGIN", api: "LIMIT_API" },
  counter: "EDGELIMIT_COUNTER",
  // A Durable Object lives in one location; a request from the far side of the world pays a
  // round trip to it. 50 ms would make the exact quota fail open there.
  budgetMs: 1000,
  origin: (request) => {
    // Stands in for the application: shows what the origin received.
    const body = {
      ok: true,
      path: new URL(request.url).pathname,
      remaining: request.headers.get("x-ratelimit-remaining"),
    };
    return Response.json(body);
  },
});
