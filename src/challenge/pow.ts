import { GenerationalCache } from "../core/generational-cache.js";
import { type KeyRing, leadingZeroBits, randomToken, sha256 } from "./crypto.js";

const MAX_SOLUTION_LENGTH = 16;
const MAX_CHALLENGE_LENGTH = 160;

export interface ProofOfWorkOptions {
  readonly keys: KeyRing;
  readonly policyId: Promise<string>;
  readonly difficulty: number;
  readonly ttlMs: number;
  /** Bounds the memory of spent challenges. */
  readonly maxSpent?: number;
}

export type ProofResult = "ok" | "malformed" | "forged" | "expired" | "insufficient" | "replayed";

/**
 * Hashcash over SHA-256. The server hands out `<expiry>.<nonce>.<difficulty>.<MAC>`, the MAC
 * binding it to the subject that asked and to the policy; the browser finds a counter whose
 * `SHA-256("<challenge>:<counter>")` starts with `difficulty` zero bits. Work cannot be done
 * ahead of time (the nonce is fresh and expires), cannot be carried to another subject (the MAC
 * would not verify), and a spent challenge is refused a second time while it is still valid.
 */
export class ProofOfWork {
  readonly #options: ProofOfWorkOptions;
  /** Spent challenges and when they expire anyway; insertion order is expiry order. */
  /** Solved challenges until they expire; bounded (a forgotten one only buys its solver a pass again). */
  readonly #spent: GenerationalCache<number>;

  constructor(options: ProofOfWorkOptions) {
    this.#options = options;
    this.#spent = new GenerationalCache(Math.max(1, Math.floor((options.maxSpent ?? 50_000) / 2)));
  }

  get difficulty(): number {
    return this.#options.difficulty;
  }

  async issue(subject: string, now: number): Promise<string> {
    const expires = Math.floor((now + this.#options.ttlMs) / 1000).toString(36);
    const nonce = randomToken(16);
    const difficulty = String(this.#options.difficulty);
    const mac = await this.#options.keys.sign(
      await this.#message(subject, expires, nonce, difficulty),
    );
    return `${expires}.${nonce}.${difficulty}.${mac}`;
  }

  async verify(
    challenge: string,
    solution: string,
    subject: string,
    now: number,
  ): Promise<ProofResult> {
    if (challenge.length > MAX_CHALLENGE_LENGTH || !/^\d{1,16}$/.test(solution)) return "malformed";
    if (solution.length > MAX_SOLUTION_LENGTH) return "malformed";
    const [expires, nonce, difficulty, mac, extra] = challenge.split(".");
    if (
      expires === undefined ||
      nonce === undefined ||
      difficulty === undefined ||
      mac === undefined ||
      extra !== undefined ||
      !/^[0-9a-z]{1,10}$/.test(expires) ||
      !/^\d{1,2}$/.test(difficulty)
    ) {
      return "malformed";
    }
    const signed = await this.#options.keys.verify(
      await this.#message(subject, expires, nonce, difficulty),
      mac,
    );
    if (!signed) return "forged";
    const expiresMs = Number.parseInt(expires, 36) * 1000;
    if (!(expiresMs > now)) return "expired";
    if (leadingZeroBits(await sha256(`${challenge}:${solution}`)) < Number(difficulty)) {
      return "insufficient";
    }
    const spentUntil = this.#spent.get(challenge);
    if (spentUntil !== undefined && spentUntil > now) return "replayed";
    this.#spent.set(challenge, expiresMs);
    return "ok";
  }

  async #message(
    subject: string,
    expires: string,
    nonce: string,
    difficulty: string,
  ): Promise<string> {
    return `pow|${await this.#options.policyId}|${subject}|${expires}|${nonce}|${difficulty}`;
  }
}

/** Finds a solution the way the page does; for tests and for non-browser clients. */
export async function solveProofOfWork(challenge: string, difficulty: number): Promise<string> {
  for (let counter = 0; ; counter++) {
    if (leadingZeroBits(await sha256(`${challenge}:${counter}`)) >= difficulty)
      return String(counter);
  }
}
