import { EdgelimitError } from "../core/errors.js";

export interface SiteverifyOptions {
  readonly kind: "turnstile" | "hcaptcha";
  readonly secret: string;
  readonly verifyUrl: string;
  readonly fetch?: typeof fetch;
  readonly timeoutMs?: number;
}

/** The form field the provider's widget fills in. */
export function responseField(kind: "turnstile" | "hcaptcha"): string {
  return kind === "turnstile" ? "cf-turnstile-response" : "h-captcha-response";
}

/**
 * Checks a Cloudflare Turnstile or hCaptcha token with the provider's siteverify endpoint
 * (both take `secret`, `response` and `remoteip` as a form and answer `{ success }`). A
 * provider that is down or slow fails the check: a failed verification is only a retry for a
 * real user, while accepting on error would let anyone skip the challenge.
 */
export class Siteverify {
  readonly #options: SiteverifyOptions;

  constructor(options: SiteverifyOptions) {
    if (options.secret === "") {
      throw new EdgelimitError(
        "EL_POLICY_SECRET_MISSING",
        `challenge.provider.secret for ${options.kind} is empty`,
      );
    }
    this.#options = options;
  }

  get kind(): "turnstile" | "hcaptcha" {
    return this.#options.kind;
  }

  async verify(token: string, remoteIp: string | undefined): Promise<boolean> {
    if (token === "" || token.length > 4096) return false;
    const body = new URLSearchParams({ secret: this.#options.secret, response: token });
    if (remoteIp !== undefined) body.set("remoteip", remoteIp);
    const fetcher = this.#options.fetch ?? fetch;
    try {
      const response = await fetcher(this.#options.verifyUrl, {
        method: "POST",
        body,
        signal: AbortSignal.timeout(this.#options.timeoutMs ?? 5000),
      });
      if (!response.ok) return false;
      const result = (await response.json()) as { success?: unknown };
      return result.success === true;
    } catch {
      return false;
    }
  }
}
