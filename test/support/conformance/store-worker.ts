/**
 * A Worker for the conformance suite: applies the counters it is sent with the Cloudflare
 * store, whose exact counters live in `EdgelimitCounter` Durable Objects, in workerd. With a
 * `continent`, the store has areas (adapters/cloudflare/areas.ts) and that continent's isolate
 * counts hybrid rules through its area's objects.
 */
import {
  CloudflareStore,
  EdgelimitCounter,
  type WorkerEnv,
} from "../../../src/adapters/cloudflare/index.js";
import type { CounterSpec } from "../../../src/core/types.js";

export { EdgelimitCounter };

/** North America is the lease area; Europe and Asia are far areas, each with an allowance. */
const AREAS = { lease: "enam", byContinent: { NA: "enam", EU: "weur", AS: "apac" } };

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    const { counters, now, continent } = (await request.json()) as {
      counters: CounterSpec[];
      now: number;
      continent?: string;
    };
    const store = new CloudflareStore({
      env,
      ratelimits: {},
      counter: "EDGELIMIT_COUNTER",
      ...(continent === undefined ? {} : { areas: AREAS }),
    });
    store.locate({ continent });
    try {
      return Response.json(await store.apply(counters, now));
    } catch (error) {
      return new Response(error instanceof Error ? error.message : String(error), { status: 500 });
    }
  },
};
