import { GenerationalCache } from "../core/generational-cache.js";
import { readHeader } from "../core/request-headers.js";
import type { PassVerifier, RequestDescription } from "../core/types.js";
import type { KeyRing } from "./crypto.js";

const PASS_VERSION = "1";
const MAX_PASS_LENGTH = 256;
/** Verified passes per cache generation (at most twice this many remembered). */
const CACHED_PASSES_PER_GENERATION = 8192;

export interface PassOptions {
  readonly keys: KeyRing;
  /** Resolves to the id the pass is bound to; a pass from another policy never verifies. */
  readonly policyId: Promise<string>;
  readonly ttlMs: number;
  readonly cookieName: string;
  readonly secureCookie: boolean;
}

/**
 * A pass is `1.<expiry, epoch seconds in base 36>.<HMAC-SHA-256>` in a cookie. The MAC covers
 * the expiry, the policy id and the counted subject (`ip:203.0.113.7`, an IPv6 /64, or
 * `user:u_abc`), none of which the token carries: a pass copied to another address or user,
 * or kept past its expiry, or edited in any byte, does not verify.
 */
export class Passes implements PassVerifier {
  readonly #options: PassOptions;
  /**
   * Verified (subject, pass) pairs and their expiry: a holder sends the same pass with every
   * request, and one Web Crypto HMAC costs some twenty times a whole memory-store decision.
   * Only successes are cached, so forged tokens cannot crowd the cache with answers.
   */
  readonly #verified = new GenerationalCache<number>(CACHED_PASSES_PER_GENERATION);

  constructor(options: PassOptions) {
    this.#options = options;
  }

  get ttlMs(): number {
    return this.#options.ttlMs;
  }

  async issue(subject: string, now: number): Promise<string> {
    const expires = Math.floor((now + this.#options.ttlMs) / 1000).toString(36);
    const mac = await this.#options.keys.sign(await this.#message(subject, expires));
    return `${PASS_VERSION}.${expires}.${mac}`;
  }

  async verifyToken(token: string, subject: string, now: number): Promise<boolean> {
    return this.#check(token, subject, now);
  }

  /**
   * Synchronous unless the MAC has to be computed: a malformed or expired token, or a pass
   * already verified for this subject, is answered without a promise (the limiter then stays
   * on its synchronous path, and so does the gateway).
   */
  #check(token: string, subject: string, now: number): boolean | Promise<boolean> {
    if (token.length > MAX_PASS_LENGTH) return false;
    const [version, expires, mac, extra] = token.split(".");
    if (
      version !== PASS_VERSION ||
      expires === undefined ||
      mac === undefined ||
      extra !== undefined
    ) {
      return false;
    }
    if (!/^[0-9a-z]{1,10}$/.test(expires)) return false;
    const expiresMs = Number.parseInt(expires, 36) * 1000;
    if (!(expiresMs > now)) return false;
    // A pass that claims to outlive its TTL was not issued by us (or the TTL was shortened).
    if (expiresMs > now + this.#options.ttlMs + 1000) return false;
    const cacheKey = `${subject}\n${token}`;
    // The expiry was checked above: a remembered pass is one whose MAC verified.
    if (this.#verified.get(cacheKey) !== undefined) return true;
    return this.#verifyMac(cacheKey, subject, expires, mac, expiresMs);
  }

  async #verifyMac(
    cacheKey: string,
    subject: string,
    expires: string,
    mac: string,
    expiresMs: number,
  ): Promise<boolean> {
    const valid = await this.#options.keys.verify(await this.#message(subject, expires), mac);
    if (valid) this.#remember(cacheKey, expiresMs);
    return valid;
  }

  #remember(cacheKey: string, expiresMs: number): void {
    this.#verified.set(cacheKey, expiresMs);
  }

  /** The limiter's hook: the request's pass cookie, checked against the counted subject. */
  verify(request: RequestDescription, subject: string, now: number): boolean | Promise<boolean> {
    const token = passFromCookies(
      readHeader(request.headers, "cookie", request.lowerCaseHeaders),
      this.#options.cookieName,
    );
    if (token === undefined) return false;
    return this.#check(token, subject, now);
  }

  cookie(token: string): string {
    const maxAge = Math.floor(this.#options.ttlMs / 1000);
    const secure = this.#options.secureCookie ? "; Secure" : "";
    return `${this.#options.cookieName}=${token}; Max-Age=${maxAge}; Path=/; HttpOnly; SameSite=Lax${secure}`;
  }

  async #message(subject: string, expires: string): Promise<string> {
    return `pass|${PASS_VERSION}|${await this.#options.policyId}|${subject}|${expires}`;
  }
}

export function passFromCookies(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
