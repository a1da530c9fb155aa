/**
 * Hono in workerd for the guard table: `honoRateLimit` with one row's options and the memory
 * store, built on the first request from the `EDGELIMIT_SETUP` binding. The peer address is
 * `CF-Connecting-IP`, as a Worker reports it. A middleware that refuses its options answers 500
 * with the reason.
 */
import { Hono } from "hono";
import { honoRateLimit } from "../../../src/adapters/fetch.js";
import { createChallenge } from "../../../src/challenge/index.js";
import { createLimiter } from "../../../src/limiter.js";
import { memoryStore } from "../../../src/stores/memory.js";
import { originResponse, SETUP_PATH, type WorkerSetup, webOptions } from "./setup.js";

interface Env {
  readonly EDGELIMIT_SETUP: string;
  readonly EDGELIMIT_CHALLENGE_SECRET: string;
}

let app: Hono | Error | undefined;

function build(env: Env): Hono {
  const { policy, setup } = JSON.parse(env.EDGELIMIT_SETUP) as WorkerSetup;
  const challenge =
    setup.challenge === true
      ? createChallenge(policy, {
          env: { EDGELIMIT_CHALLENGE_SECRET: env.EDGELIMIT_CHALLENGE_SECRET },
        })
      : undefined;
  const limiter = createLimiter({ policy, store: memoryStore(), passes: challenge?.passes });
  const hono = new Hono();
  hono.use(
    honoRateLimit({
      limiter,
      ip: (request) => request.headers.get("cf-connecting-ip") ?? undefined,
      challenge,
      ...webOptions(setup),
    }),
  );
  hono.all("*", (c) => originResponse(c.req.raw));
  return hono;
}

export default {
  fetch(request: Request, env: Env, ctx: unknown) {
    if (app === undefined) {
      try {
        app = build(env);
      } catch (error) {
        app = error as Error;
      }
    }
    if (app instanceof Error) return new Response(`setup failed: ${app.message}`, { status: 500 });
    if (new URL(request.url).pathname === SETUP_PATH) return new Response(null, { status: 204 });
    return app.fetch(request, env, ctx as never);
  },
};
