/**
 * The guard every adapter runs, and the one place that decides what happens to a request before
 * the application sees it: whether it is skipped, what it costs, which user the application
 * vouches for, whether it asks for the challenge page, the verdict, the answer to a refusal and
 * which request headers the origin may see. An adapter hands over its runtime's request as an
 * opaque value with two functions that read it (`GuardTranslation`), and writes the action it
 * gets back in its runtime's terms; it decides nothing, as Hono's runtime adapters decide
 * nothing.
 */
import { checkCost } from "../core/cost.js";
import { EdgelimitError } from "../core/errors.js";
import type { ResolvedPolicy } from "../core/model.js";
import { matchesPrefix, normalizePath } from "../core/path.js";
import type { ChallengeClient, ChallengeHandler, RequestDescription } from "../core/types.js";
import type { Verdict } from "./respond.js";

/** A user the application verified itself (its session), as the `user` option returns it. */
export interface ApplicationUser {
  readonly id: string;
  readonly plan?: string | undefined;
}

/** What the guard needs of a limiter (`Limiter` from `createLimiter` is one). */
export interface GuardLimiter {
  readonly policy: ResolvedPolicy;
  /** The verdict, synchronously when nothing has to wait. */
  decide(request: RequestDescription): Verdict | Promise<Verdict>;
  /** The client as `decide` sees it: the challenge page binds its passes to it. */
  clientOf(request: RequestDescription): Promise<ChallengeClient>;
}

/**
 * The options every adapter offers, the same everywhere, as functions of what its runtime
 * hands a request handler (`Args`: Express's request; a fetch handler's request and context;
 * a Worker's request and `env`; a CloudFront request). `OnRefused` is the adapter's own way of
 * answering (writing to Node's response, returning a `Response`, a CloudFront result).
 */
export interface GuardOptions<Args extends readonly unknown[], OnRefused> {
  /** Serves the challenge page under its path when the policy challenges. */
  readonly challenge?: ChallengeHandler | undefined;
  /** Requests for which this returns true pass uncounted, with no rate-limit headers. */
  readonly skip?: ((...request: Args) => boolean | Promise<boolean>) | undefined;
  /** Units this request costs (default: each rule's `cost`, 1 unless the policy says). */
  readonly cost?: ((...request: Args) => number | undefined) | undefined;
  /**
   * The user your application has verified for this request (its session), counted as that
   * user. The policy must allow it (`identity.user.application: true`; refused otherwise when
   * the adapter is set up); a token or trusted header the policy names comes first. Never
   * derive it from what the client sent unchecked.
   */
  readonly user?: ((...request: Args) => ApplicationUser | undefined) | undefined;
  /**
   * The answer to a refused request instead of the default (429 with a JSON body, 302 to the
   * challenge, 503 when failing closed, 403 for a denied address), with the verdict's headers
   * under its own: set on Node's response before it is called, added elsewhere to the answer it
   * returns where it did not set them itself (its `content-type`, its `retry-after` win).
   */
  readonly onRefused?: OnRefused | undefined;
}

/** How an adapter reads its runtime's request and answers through its `onRefused`. */
export interface GuardTranslation<Req, Ctx, OnRefused, Answer> {
  /** The core's description: the peer address as the runtime reports it, never a header. */
  describe(request: Req, context: Ctx): RequestDescription;
  /** The Web `Request` the challenge page reads; built only for the page. */
  webRequest(request: Req, context: Ctx): Request;
  /** Calls `onRefused` in the runtime's terms, the verdict's headers with its answer. */
  refused(
    onRefused: OnRefused,
    request: Req,
    context: Ctx,
    verdict: Verdict,
  ): Answer | Promise<Answer>;
}

/**
 * The request headers of a request passed on. Names are lower case. Every client header named
 * `remove`, or named as a key of `set`, is dropped, then `set` is added: the origin never reads
 * a value the client wrote under a name that is ours.
 */
export interface ForwardHeaders {
  readonly remove: string;
  readonly set: Readonly<Record<string, string>>;
}

/** Pass the request on, with these request headers, and add `respond` to the response. */
export interface Forward extends ForwardHeaders {
  readonly kind: "forward";
  /** The verdict; undefined when `skip` passed the request uncounted. */
  readonly verdict: Verdict | undefined;
  /** Headers for the client's response (the rate-limit headers). */
  readonly respond: Readonly<Record<string, string>>;
}

/** Answer with the verdict's own refusal: its `status`, `headers` and `body`. */
export interface Refuse {
  readonly kind: "refuse";
  readonly verdict: Verdict;
}

/** `onRefused` answered the refusal: send its answer. */
export interface Answered<Answer> {
  readonly kind: "answered";
  readonly verdict: Verdict;
  readonly answer: Answer;
}

/** The request was for the challenge page: send this response. */
export interface ChallengePage {
  readonly kind: "page";
  readonly response: Response;
}

export type GuardAction<Answer> = Forward | Refuse | Answered<Answer> | ChallengePage;

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * The guard of one adapter: built once with the user's options (refused here when the policy
 * cannot honour them), then `run` for every request.
 */
export class Guard<Req, Ctx, OnRefused, Answer> {
  readonly #name: string;
  readonly #limiter: GuardLimiter;
  readonly #options: GuardOptions<[request: Req, context: Ctx], OnRefused>;
  readonly #translation: GuardTranslation<Req, Ctx, OnRefused, Answer>;

  /** `name` is the adapter's, as the user calls it, for the messages of refused options. */
  constructor(
    name: string,
    limiter: GuardLimiter,
    options: GuardOptions<[request: Req, context: Ctx], OnRefused>,
    translation: GuardTranslation<Req, Ctx, OnRefused, Answer>,
  ) {
    checkGuardOptions(name, limiter.policy, options);
    this.#name = name;
    this.#limiter = limiter;
    this.#options = options;
    this.#translation = translation;
  }

  /**
   * What to do with one request. Synchronous when nothing has to wait (no asynchronous `skip`,
   * a verdict the limiter gives at once), so a caller that checks for a promise pays no turn.
   */
  run(request: Req, context: Ctx): GuardAction<Answer> | Promise<GuardAction<Answer>> {
    const skip = this.#options.skip;
    if (skip === undefined) return this.#decide(request, context);
    const skipped = skip(request, context);
    if (typeof skipped === "boolean") {
      return skipped ? this.uncounted() : this.#decide(request, context);
    }
    return Promise.resolve(skipped).then((yes) =>
      yes ? this.uncounted() : this.#decide(request, context),
    );
  }

  /** Passing a request on uncounted: nothing for the origin, and the client's copy dropped. */
  uncounted(): Forward {
    return {
      kind: "forward",
      verdict: undefined,
      remove: this.#limiter.policy.headers.origin,
      set: NO_HEADERS,
      respond: NO_HEADERS,
    };
  }

  #decide(request: Req, context: Ctx): GuardAction<Answer> | Promise<GuardAction<Answer>> {
    const description = this.#describe(request, context);
    const page = challengePage(this.#options.challenge, this.#limiter, description, () =>
      this.#translation.webRequest(request, context),
    );
    if (page !== undefined) {
      return page.then((response): ChallengePage => ({ kind: "page", response }));
    }
    const decided = this.#limiter.decide(description);
    if (decided instanceof Promise) {
      return decided.then((verdict) => this.#conclude(request, context, verdict));
    }
    return this.#conclude(request, context, decided);
  }

  #describe(request: Req, context: Ctx): RequestDescription {
    const description = this.#translation.describe(request, context);
    const { cost, user } = this.#options;
    if (cost === undefined && user === undefined) return description;
    const units = cost?.(request, context);
    const verified = user?.(request, context);
    return {
      ...description,
      ...(units === undefined ? {} : { cost: validCost(this.#name, units) }),
      ...(verified === undefined ? {} : { user: verified }),
    };
  }

  #conclude(
    request: Req,
    context: Ctx,
    verdict: Verdict,
  ): GuardAction<Answer> | Promise<GuardAction<Answer>> {
    if (verdict.action === "allow") {
      return {
        kind: "forward",
        verdict,
        remove: this.#limiter.policy.headers.origin,
        set: verdict.originHeaders,
        respond: verdict.headers,
      };
    }
    const onRefused = this.#options.onRefused;
    if (onRefused === undefined) return { kind: "refuse", verdict };
    const answer = this.#translation.refused(onRefused, request, context, verdict);
    if (isThenable(answer)) {
      return Promise.resolve(answer).then(
        (answered): Answered<Answer> => ({ kind: "answered", verdict, answer: answered }),
      );
    }
    return { kind: "answered", verdict, answer: answer as Answer };
  }
}

/**
 * Refuses options that would be ignored: a `user` option the policy does not allow would count
 * every such user as the anonymous client they connect from, silently.
 */
export function checkGuardOptions(
  name: string,
  policy: ResolvedPolicy,
  options: { readonly user?: unknown },
): void {
  if (options.user === undefined || policy.identity.application === true) return;
  throw new EdgelimitError(
    "EL_BAD_OPTION",
    `${name}: the user option counts requests as the users your application verified, which the policy does not allow; set identity.user.application: true in the policy`,
  );
}

/**
 * The challenge page's answer when `description` asks for it (its path, normalised: so
 * `//captcha/../captcha` is the page too), or undefined when the request is for anything else.
 * The page is served to the client as the limiter sees it (its trusted address and its
 * subject), and the request for it is not counted. `toRequest` builds the Web `Request` the
 * page reads, only when it is needed. The guard and the rate limit service's `/check` use it.
 */
export function challengePage(
  challenge: ChallengeHandler | undefined,
  limiter: Pick<GuardLimiter, "clientOf">,
  description: RequestDescription,
  toRequest: () => Request,
): Promise<Response> | undefined {
  if (challenge === undefined) return undefined;
  if (!matchesPrefix(normalizePath(description.path), challenge.path)) return undefined;
  return limiter.clientOf(description).then((client) => challenge.handle(toRequest(), client));
}

/** A cost the `cost` option returned, checked as the engine checks every cost. */
function validCost(name: string, cost: number): number {
  checkCost(cost, `${name}: cost()`);
  return cost;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
