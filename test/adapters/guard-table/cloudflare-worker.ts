/**
 * The Worker of the guard table: `createCloudflareHandler` with one row's options, built on the
 * first request from the `EDGELIMIT_SETUP` binding (a Worker may not draw random keys at
 * start-up). A handler that refuses its options answers 500 with the reason, so that the table
 * can read what the constructor said.
 */
import {
  createCloudflareHandler,
  EdgelimitCounter,
  type WorkerEnv,
  type WorkerFetch,
} from "../../../src/adapters/cloudflare/index.js";
import { originResponse, SETUP_PATH, type WorkerSetup, webOptions } from "./setup.js";

export { EdgelimitCounter };

let handler: { fetch: WorkerFetch } | Error | undefined;

function build(env: WorkerEnv): { fetch: WorkerFetch } {
  const { policy, setup } = JSON.parse(env.EDGELIMIT_SETUP as string) as WorkerSetup;
  return createCloudflareHandler({
    policy,
    ratelimits: {},
    // A loaded test machine must not make the Durable Object's answer fail open.
    budgetMs: 10_000,
    ...webOptions(setup),
    origin: (request) => originResponse(request),
  });
}

export default {
  fetch(request: Request, env: WorkerEnv, ctx: { waitUntil(promise: Promise<unknown>): void }) {
    if (handler === undefined) {
      try {
        handler = build(env);
      } catch (error) {
        handler = error as Error;
      }
    }
    if (handler instanceof Error) {
      return new Response(`setup failed: ${handler.message}`, { status: 500 });
    }
    if (new URL(request.url).pathname === SETUP_PATH) return new Response(null, { status: 204 });
    return handler.fetch(request, env, ctx);
  },
};
