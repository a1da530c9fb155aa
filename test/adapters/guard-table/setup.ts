/**
 * One row of the guard table as data: the options every adapter offers, written once and
 * turned into each runtime's functions by its driver (and by the Workers in workerd, which
 * bundle this file: it imports nothing of Node).
 */
import type { ResolvedPolicy } from "../../../src/core/model.js";
import type { ApplicationUser } from "../../../src/http/guard.js";
import type { Verdict } from "../../../src/http/respond.js";

export interface Setup {
  /** Paths under this prefix pass uncounted. */
  readonly skip?: string;
  /** Requests for this path cost this many units. */
  readonly cost?: { readonly path: string; readonly units: number };
  /** The application's sessions: the `session` cookie's value -> the user it verified. */
  readonly sessions?: Readonly<Record<string, ApplicationUser>>;
  /** Refusals are answered by `onRefused` (see `customRefusal`). */
  readonly onRefused?: boolean;
  /** The challenge page is mounted. */
  readonly challenge?: boolean;
}

/** What a Worker in the table reads from its `EDGELIMIT_SETUP` binding. */
export interface WorkerSetup {
  readonly policy: ResolvedPolicy;
  readonly setup: Setup;
}

/**
 * A Worker of the table builds its adapter on the request for this path and answers it 204
 * without passing it on, or 500 with the adapter's refusal of its options.
 */
export const SETUP_PATH = "/__setup";

export const CHALLENGE_SECRET = "guard-table-challenge-secret-0123456789";

/** The request header the origin reports, as every origin in the table does. */
export const ORIGIN_HEADER = "x-ratelimit-remaining";

/** The options of a row as functions of a path and a cookie header, for drivers to wrap. */
export interface NeutralOptions {
  readonly skip?: (path: string) => boolean;
  readonly cost?: (path: string) => number | undefined;
  readonly user?: (cookie: string | null | undefined) => ApplicationUser | undefined;
  readonly refusal?: (verdict: Verdict) => CustomRefusal;
}

/** A refusal `onRefused` writes: its own status, body and headers. */
export interface CustomRefusal {
  readonly status: number;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The headers of the custom refusal: one the verdict has too, with a value of its own
 * (`content-type`, which the default refusal sets to JSON; `retry-after`), and one of its own.
 */
export const REFUSAL_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "retry-after": "3600",
  "x-refused-by": "onRefused",
} as const;

export function neutralOptions(setup: Setup): NeutralOptions {
  const { skip, cost, sessions } = setup;
  return {
    ...(skip === undefined ? {} : { skip: (path: string) => pathOf(path).startsWith(skip) }),
    ...(cost === undefined
      ? {}
      : { cost: (path: string) => (pathOf(path) === cost.path ? cost.units : undefined) }),
    ...(sessions === undefined
      ? {}
      : {
          user: (cookie: string | null | undefined) => {
            const session = /(?:^|;\s*)session=([\w-]+)/.exec(cookie ?? "")?.[1];
            return session === undefined ? undefined : sessions[session];
          },
        }),
    ...(setup.onRefused === true ? { refusal: customRefusal } : {}),
  };
}

/**
 * The custom refusal: 418 naming the rule and the subject, so rows can read who was counted,
 * with headers of its own.
 */
export function customRefusal(verdict: Verdict): CustomRefusal {
  return {
    status: 418,
    body: `refused ${verdict.rule} ${verdict.subject}`,
    headers: REFUSAL_HEADERS,
  };
}

/** What every origin in the table answers: the remaining count it was given, if any. */
export function originBody(remaining: string | null | undefined): string {
  return JSON.stringify({ origin: remaining ?? null });
}

function pathOf(path: string): string {
  const query = path.indexOf("?");
  return query === -1 ? path : path.slice(0, query);
}

/** The row's options for a runtime of Web `Request`s (fetch handlers, Hono, the Worker). */
export function webOptions(setup: Setup): {
  skip?: (request: Request) => boolean;
  cost?: (request: Request) => number | undefined;
  user?: (request: Request) => ApplicationUser | undefined;
  onRefused?: (request: Request, verdict: Verdict) => Response;
} {
  const { skip, cost, user, refusal } = neutralOptions(setup);
  return {
    ...(skip === undefined ? {} : { skip: (request: Request) => skip(pathOfUrl(request.url)) }),
    ...(cost === undefined ? {} : { cost: (request: Request) => cost(pathOfUrl(request.url)) }),
    ...(user === undefined
      ? {}
      : { user: (request: Request) => user(request.headers.get("cookie")) }),
    ...(refusal === undefined
      ? {}
      : {
          onRefused: (_request: Request, verdict: Verdict) => {
            const { status, body, headers } = refusal(verdict);
            return new Response(body, { status, headers });
          },
        }),
  };
}

/** The origin's answer as a Web `Response`. */
export function originResponse(request: Request): Response {
  return new Response(originBody(request.headers.get(ORIGIN_HEADER)), {
    headers: { "content-type": "application/json" },
  });
}

function pathOfUrl(url: string): string {
  const parsed = new URL(url);
  return parsed.pathname + parsed.search;
}
