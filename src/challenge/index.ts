import { resolveSecret, type SecretContext } from "../core/secrets.js";
import type { ChallengeHandler } from "../core/types.js";
import type { ResolvedPolicy } from "../policy/types.js";
import { base64UrlEncode, KeyRing, randomToken, sha256 } from "./crypto.js";
import { type PageContent, pageHeaders, renderPage } from "./page.js";
import { Passes } from "./pass.js";
import { ProofOfWork } from "./pow.js";
import { safeRedirect } from "./redirect.js";
import { responseField, Siteverify } from "./siteverify.js";

export { KeyRing } from "./crypto.js";
export { Passes, passFromCookies } from "./pass.js";
export { ProofOfWork, type ProofResult, solveProofOfWork } from "./pow.js";
export { safeRedirect } from "./redirect.js";
export { Siteverify } from "./siteverify.js";

export interface ChallengeOptions extends SecretContext {
  /** Epoch milliseconds; injected so tests drive expiry. */
  readonly clock?: () => number;
  /** Used for Turnstile and hCaptcha siteverify calls (defaults to the global fetch). */
  readonly fetch?: typeof fetch;
}

const MAX_FORM_BYTES = 8192;

/**
 * The challenge page, its verification endpoint and the pass verifier for one policy, or
 * undefined when no enforcing rule challenges. Routes, relative to `policy.challenge.path`:
 * `GET <path>?redirect=/where` serves the page; `POST <path>/verify` checks the answer and, on
 * success, sets the pass cookie and answers 303 to the (same-origin) redirect target.
 */
export function createChallenge(
  policy: ResolvedPolicy,
  options: ChallengeOptions = {},
): Challenge | undefined {
  if (!policy.rules.some((rule) => rule.action === "challenge" && !rule.shadow)) return undefined;
  return new Challenge(policy, options);
}

export class Challenge implements ChallengeHandler {
  readonly path: string;
  readonly passes: Passes;
  readonly #verifyPath: string;
  readonly #clock: () => number;
  readonly #proofOfWork: ProofOfWork | undefined;
  readonly #siteverify: Siteverify | undefined;

  constructor(policy: ResolvedPolicy, options: ChallengeOptions = {}) {
    const config = policy.challenge;
    this.path = config.path;
    this.#verifyPath = `${config.path.replace(/\/+$/, "")}/verify`;
    this.#clock = options.clock ?? Date.now;
    const secrets: string[] = [];
    if (config.secret === undefined) {
      // Without a configured secret passes still work, but only in this process and only
      // until it restarts; several gateway instances need a shared `challenge.secret`.
      secrets.push(randomToken(32));
    } else {
      secrets.push(resolveSecret(config.secret, options, "challenge.secret"));
      if (config.previousSecret !== undefined) {
        secrets.push(resolveSecret(config.previousSecret, options, "challenge.previousSecret"));
      }
    }
    const keys = new KeyRing(secrets);
    const policyId =
      config.policyId === undefined ? policyHash(policy) : Promise.resolve(config.policyId);
    this.passes = new Passes({
      keys,
      policyId,
      ttlMs: config.passTtlMs,
      cookieName: config.cookie.name,
      secureCookie: config.cookie.secure,
    });
    const provider = config.provider;
    if (provider.kind === "pow") {
      this.#proofOfWork = new ProofOfWork({
        keys,
        policyId,
        difficulty: config.difficulty,
        ttlMs: config.challengeTtlMs,
      });
    } else {
      this.#siteverify = new Siteverify({
        kind: provider.kind,
        secret: resolveSecret(provider.secret, options, "challenge.provider.secret"),
        verifyUrl: provider.verifyUrl,
        fetch: options.fetch,
      });
    }
    this.#widget =
      provider.kind === "pow" ? undefined : { kind: provider.kind, siteKey: provider.siteKey };
  }

  readonly #widget: PageContent["widget"];

  async handle(
    request: Request,
    client: { readonly ip: string | undefined; readonly subject: string },
  ): Promise<Response> {
    const url = new URL(request.url);
    const method = request.method.toUpperCase();
    if (url.pathname === this.path && (method === "GET" || method === "HEAD")) {
      const redirect = safeRedirect(url.searchParams.get("redirect"));
      return this.#page(client.subject, redirect, false, 200, method === "HEAD");
    }
    if (url.pathname === this.#verifyPath && method === "POST") {
      return this.#verify(request, client);
    }
    if (url.pathname === this.#verifyPath || url.pathname === this.path) {
      return new Response("method not allowed\n", {
        status: 405,
        headers: {
          allow: url.pathname === this.path ? "GET, HEAD" : "POST",
          "cache-control": "no-store",
        },
      });
    }
    return new Response("not found\n", { status: 404, headers: { "cache-control": "no-store" } });
  }

  async #verify(
    request: Request,
    client: { readonly ip: string | undefined; readonly subject: string },
  ): Promise<Response> {
    const now = this.#clock();
    const form = await readForm(request);
    const redirect = safeRedirect(form?.get("redirect"));
    if (form === undefined) return this.#page(client.subject, redirect, true, 400, false);
    let solved = false;
    if (this.#proofOfWork !== undefined) {
      const result = await this.#proofOfWork.verify(
        form.get("challenge") ?? "",
        form.get("solution") ?? "",
        client.subject,
        now,
      );
      solved = result === "ok";
    } else if (this.#siteverify !== undefined) {
      const token = form.get(responseField(this.#siteverify.kind)) ?? "";
      solved = await this.#siteverify.verify(token, client.ip);
    }
    if (!solved) return this.#page(client.subject, redirect, true, 403, false);
    const pass = await this.passes.issue(client.subject, now);
    return new Response(null, {
      status: 303,
      headers: {
        location: redirect,
        "set-cookie": this.passes.cookie(pass),
        "cache-control": "no-store",
      },
    });
  }

  async #page(
    subject: string,
    redirect: string,
    failed: boolean,
    status: number,
    headOnly: boolean,
  ): Promise<Response> {
    const content: PageContent = {
      verifyPath: this.#verifyPath,
      redirect,
      challenge:
        this.#proofOfWork === undefined
          ? undefined
          : await this.#proofOfWork.issue(subject, this.#clock()),
      difficulty: this.#proofOfWork?.difficulty,
      widget: this.#widget,
      failed,
      scriptNonce: randomToken(16),
    };
    return new Response(headOnly ? null : renderPage(content), {
      status,
      headers: pageHeaders(content),
    });
  }
}

async function readForm(request: Request): Promise<URLSearchParams | undefined> {
  const type = request.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/x-www-form-urlencoded")) return undefined;
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > MAX_FORM_BYTES) return undefined;
  const text = await request.text();
  if (text.length > MAX_FORM_BYTES) return undefined;
  return new URLSearchParams(text);
}

/**
 * The default policy binding: a hash of the resolved policy, so that a pass earned under one
 * policy (one set of limits, one challenge configuration) is not honoured by another. Set
 * `challenge.policyId` to keep passes across policy edits.
 */
async function policyHash(policy: ResolvedPolicy): Promise<string> {
  // Secrets stay out of the binding, or rotating them would void every pass; lists stay out
  // because a list refresh changes who is counted, not what a pass is worth.
  const { secret: _secret, previousSecret: _previous, provider, ...challenge } = policy.challenge;
  const binding = {
    ...policy,
    lists: undefined,
    challenge: { ...challenge, provider: provider.kind },
  };
  return base64UrlEncode((await sha256(JSON.stringify(binding))).subarray(0, 12));
}
