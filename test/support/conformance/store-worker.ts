/**
 * A Worker for the conformance suite: applies the counters it is sent with the Cloudflare
 * store, whose exact counters live in `EdgelimitCounter` Durable Objects, in workerd.
 */
import {
  CloudflareStore,
  EdgelimitCounter,
  type WorkerEnv,
} from "../../../src/adapters/cloudflare/index.js";
import type { CounterSpec } from "../../../src/core/types.js";

export { EdgelimitCounter };

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    const { counters, now } = (await request.json()) as {
      counters: CounterSpec[];
      now: number;
    };
    const store = new CloudflareStore({ env, ratelimits: {}, counter: "EDGELIMIT_COUNTER" });
    try {
      return Response.json(await store.apply(counters, now));
    } catch (error) {
      return new Response(error instanceof Error ? error.message : String(error), { status: 500 });
    }
  },
};
