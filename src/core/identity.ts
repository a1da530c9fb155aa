import { importSPKI, type JWTPayload, jwtVerify } from "jose";
import type {
  IpIdentity,
  JwtIdentity,
  SecretSource,
  TrustedHeaderIdentity,
} from "../policy/types.js";
import { EdgelimitError } from "./errors.js";
import { GenerationalCache } from "./generational-cache.js";
import { type Address, CidrSet, ipSubject, ipv4Key, parseIp } from "./ip.js";
import { subjectKey } from "./keys.js";
import type { RequestDescription } from "./types.js";

/** Reads one header from either a plain record or a `Headers` object, case-insensitively. */
export function readHeader(
  headers: RequestDescription["headers"],
  name: string,
  lowerCaseNames?: boolean,
): string | undefined {
  if (headers === undefined) return undefined;
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    // Names known to be lower case: only a name asked for with capitals can still be there.
    if (lowerCaseNames === true && !hasUpperCase(name)) return undefined;
    const lower = name.toLowerCase();
    value = record[lower];
    if (value === undefined && (lower !== name || lowerCaseNames === true)) return undefined;
    if (value === undefined) {
      // A plain object may spell the name in any case; most keys differ in length already,
      // which spares a lower-cased copy of every header name for every absent header.
      for (const key in record) {
        if (key.length === lower.length && key.toLowerCase() === lower) {
          value = record[key];
          break;
        }
      }
    }
  }
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(", ") : value;
}

function hasUpperCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code >= 65 && code <= 90) return true;
  }
  return false;
}

export interface ClientAddress {
  /** The address the client is counted as, undefined when nothing valid was found. */
  readonly address: Address | undefined;
  /** The counted subject: the address, or its IPv6 prefix. "unknown" without an address. */
  readonly subject: string;
  /** The subject as a key part: `ip:203.0.113.7` (see keys.ts). */
  readonly subjectKey: string;
  /** Whether the socket peer is one of the trusted proxies. */
  readonly peerTrusted: boolean;
  /**
   * Scratch slots that live as long as this address stays in the resolver's bounded cache:
   * the limiter keeps the subject's counters there, which saves it a map lookup and their
   * construction per request. Use only when `address` is defined (the slots of "unknown" are
   * shared, frozen).
   */
  readonly memo: unknown[];
}

/** What one address text resolves to; cached, since the same clients come back. */
interface ParsedAddress {
  readonly address: Address | undefined;
  readonly subject: string;
  readonly subjectKey: string;
  readonly trusted: boolean;
  readonly memo: unknown[];
}

/**
 * Addresses per cache generation (at most twice this many held, dotted quads and other texts
 * each): a working set of this size is answered from the young generation alone, with one
 * lookup.
 */
const CACHED_ADDRESSES_PER_GENERATION = 16_384;
const UNPARSED: ParsedAddress = {
  address: undefined,
  subject: "unknown",
  subjectKey: subjectKey("ip", "unknown"),
  trusted: false,
  // Shared across resolvers, so frozen: callers memoize only for a known address.
  memo: Object.freeze([]) as unknown as unknown[],
};

/**
 * Finds the client's address using only what is trustworthy: the socket peer, a header that
 * the platform sets, or `X-Forwarded-For` read right to left while each hop is a trusted proxy.
 * A client that writes `X-Forwarded-For` itself only adds entries to the left of the address
 * our proxy appended, so they are never reached.
 */
export class IpResolver {
  readonly #config: IpIdentity;
  readonly #trusted: CidrSet;
  readonly #cache = new GenerationalCache<ParsedAddress>(CACHED_ADDRESSES_PER_GENERATION);
  /** Dotted quads by their number (see `ipv4Key`): the usual client text, found without a string. */
  readonly #quads = new GenerationalCache<ParsedAddress, number>(CACHED_ADDRESSES_PER_GENERATION);
  #lastPeerText: string | undefined;
  #lastPeer: ParsedAddress = UNPARSED;

  constructor(config: IpIdentity) {
    this.#config = config;
    this.#trusted = new CidrSet(config.trustedProxies);
  }

  resolve(request: RequestDescription): ClientAddress {
    const peer = this.#parsePeer(request.ip);
    let client = peer;
    const { source } = this.#config;
    if (source === "header" && this.#config.header !== undefined) {
      const fromHeader = this.#parse(
        readHeader(request.headers, this.#config.header, request.lowerCaseHeaders),
      );
      if (fromHeader.address !== undefined) client = fromHeader;
    } else if (source === "x-forwarded-for" && peer.trusted) {
      client = this.#walkForwardedFor(
        readHeader(request.headers, "x-forwarded-for", request.lowerCaseHeaders),
        peer,
      );
    }
    return {
      address: client.address,
      subject: client.subject,
      subjectKey: client.subjectKey,
      peerTrusted: peer.trusted,
      memo: client.memo,
    };
  }

  isTrusted(address: Address | undefined): boolean {
    return this.#trusted.has(address);
  }

  #walkForwardedFor(header: string | undefined, peer: ParsedAddress): ParsedAddress {
    if (header === undefined || header === "") return peer;
    let client = peer;
    // Right to left without splitting: a single hop is looked up as the header string itself.
    // The comma is found with a loop: V8 answers `lastIndexOf` through a runtime call.
    let end = header.length;
    for (;;) {
      let comma = end - 1;
      while (comma >= 0 && header.charCodeAt(comma) !== 44) comma--;
      const hop = this.#parse(header.slice(comma + 1, end).trim());
      // A malformed entry was written by an untrusted party: stop at the last hop we trust.
      if (hop.address === undefined) return client;
      client = hop;
      if (!hop.trusted || comma === -1) return hop;
      end = comma;
    }
  }

  /**
   * The socket peer: behind a proxy it is the same few addresses on every request, so the last
   * one is remembered apart, which spares a lookup in the address cache.
   */
  #parsePeer(text: string | undefined): ParsedAddress {
    const last = this.#lastPeerText;
    if (text !== undefined && last !== undefined && sameText(text, last)) return this.#lastPeer;
    const parsed = this.#parse(text);
    this.#lastPeerText = text;
    this.#lastPeer = parsed;
    return parsed;
  }

  /** Parses an address text once; later requests from the same client reuse the result. */
  #parse(text: string | undefined): ParsedAddress {
    if (text === undefined) return UNPARSED;
    // A dotted quad is looked up by its number: the map then reads no key string, which for
    // thousands of clients is a cache miss per request, and hashes none.
    const quad = ipv4Key(text);
    const cache: GenerationalCache<ParsedAddress, string | number> =
      quad === undefined ? this.#cache : this.#quads;
    const key = quad ?? text;
    const cached = cache.get(key);
    if (cached !== undefined) return cached;
    const address = parseIp(text);
    const subject = address === undefined ? "unknown" : ipSubject(address, this.#config.ipv6Prefix);
    const parsed: ParsedAddress = {
      address,
      subject,
      subjectKey: subjectKey("ip", subject),
      trusted: this.#trusted.has(address),
      memo: [],
    };
    cache.set(key, parsed);
    return parsed;
  }
}

/**
 * `a === b` for two strings, compared here: each connection's peer address is a string of its
 * own, and V8 compares two such strings through a runtime call (about 800 instructions per
 * request in bench/gateway-instructions.sh), where this loop costs a few per character.
 */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a.charCodeAt(i) !== b.charCodeAt(i)) return false;
  return true;
}

export interface VerifiedUser {
  readonly id: string;
  readonly plan: string | undefined;
}

export interface SecretContext {
  /** Environment to read `{ env: NAME }` secrets from (defaults to `process.env` where it exists). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Reads `{ file: PATH }` secrets; given by the Node entry points. */
  readonly readFile?: (path: string) => string;
}

export function resolveSecret(source: SecretSource, context: SecretContext, field: string): string {
  if ("value" in source) return source.value;
  if ("env" in source) {
    const env = context.env ?? defaultEnv();
    const value = env[source.env];
    if (value === undefined || value === "") {
      throw new EdgelimitError(
        "EL_POLICY_SECRET_MISSING",
        `${field}: environment variable ${source.env} is not set; set it to the secret (for example export ${source.env}=...)`,
      );
    }
    return value;
  }
  if (context.readFile === undefined) {
    throw new EdgelimitError(
      "EL_POLICY_SECRET_MISSING",
      `${field}: secrets from files are not available in this runtime; use { env: NAME } or { value: ... }`,
    );
  }
  return context.readFile(source.file);
}

function defaultEnv(): Record<string, string | undefined> {
  const maybeProcess = (globalThis as { process?: { env?: Record<string, string | undefined> } })
    .process;
  return maybeProcess?.env ?? {};
}

export const NOT_CACHED: unique symbol = Symbol("not cached");
/** Tokens per cache generation: at most twice this many verified tokens are remembered. */
const CACHED_TOKENS_PER_GENERATION = 8192;
const MAX_CACHED_TOKEN_LENGTH = 4096;

/**
 * Verifies bearer tokens with jose. A token that is forged, expired, signed with another
 * algorithm or missing its user claim yields no user: the request is then counted as anonymous
 * by IP, so a bad token never buys a fresh counter. Verified tokens are cached (bounded) until
 * their own expiry, so a busy user costs one signature check, not one per request.
 */
export class JwtVerifier {
  readonly #config: JwtIdentity;
  /** The key, or how to make it on the first token (a cold start with no token never pays). */
  #key: Promise<CryptoKey | Uint8Array> | (() => Promise<CryptoKey | Uint8Array>);
  readonly #cache = new GenerationalCache<{ user: VerifiedUser | undefined; until: number }>(
    CACHED_TOKENS_PER_GENERATION,
  );
  readonly #cookieName: string | undefined;

  constructor(config: JwtIdentity, context: SecretContext) {
    this.#config = config;
    this.#cookieName = config.from.startsWith("cookie:") ? config.from.slice(7) : undefined;
    const symmetric = config.algorithms.every((algorithm) => algorithm.startsWith("HS"));
    if (symmetric) {
      if (config.secret === undefined) {
        throw new EdgelimitError(
          "EL_POLICY_INVALID",
          "identity.user.jwt.secret is required for HS256/HS384/HS512",
        );
      }
      const secret = resolveSecret(config.secret, context, "identity.user.jwt.secret");
      this.#key = () => Promise.resolve(new TextEncoder().encode(secret));
    } else {
      if (config.publicKey === undefined) {
        throw new EdgelimitError(
          "EL_POLICY_INVALID",
          "identity.user.jwt.publicKey is required for RS256/ES256/EdDSA",
        );
      }
      const pem = resolveSecret(config.publicKey, context, "identity.user.jwt.publicKey");
      const algorithm = config.algorithms[0] as string;
      this.#key = importSPKI(pem, algorithm);
      // Surface a bad key on first use, not as an unhandled rejection.
      this.#key.catch(() => undefined);
    }
  }

  /** The token a request carries, if any. */
  token(request: RequestDescription): string | undefined {
    if (this.#cookieName !== undefined) {
      const cookies = readHeader(request.headers, "cookie", request.lowerCaseHeaders);
      if (cookies === undefined) return undefined;
      for (const part of cookies.split(";")) {
        const eq = part.indexOf("=");
        if (eq > 0 && part.slice(0, eq).trim() === this.#cookieName)
          return part.slice(eq + 1).trim();
      }
      return undefined;
    }
    const header = readHeader(request.headers, "authorization", request.lowerCaseHeaders);
    if (header === undefined || header.length < 8) return undefined;
    if (header.slice(0, 7).toLowerCase() !== "bearer ") return undefined;
    return header.slice(7).trim();
  }

  /**
   * The cached outcome for a token checked before (a user, or undefined for a bad token), or
   * `NOT_CACHED`: lets a returning client be identified without waiting for anything.
   */
  cached(token: string, nowMs: number): VerifiedUser | undefined | typeof NOT_CACHED {
    const cached = this.#cache.get(token);
    return cached !== undefined && cached.until > nowMs ? cached.user : NOT_CACHED;
  }

  async verify(token: string, nowMs: number): Promise<VerifiedUser | undefined> {
    const cached = this.#cache.get(token);
    if (cached !== undefined && cached.until > nowMs) return cached.user;
    let user: VerifiedUser | undefined;
    let until = nowMs + 60_000;
    try {
      if (typeof this.#key === "function") this.#key = this.#key();
      const { payload } = await jwtVerify(token, await this.#key, {
        algorithms: [...this.#config.algorithms],
        issuer: this.#config.issuer,
        audience: this.#config.audience,
        clockTolerance: this.#config.clockToleranceSeconds,
        currentDate: new Date(nowMs),
        // A token that never expires would be a permanent identity; refuse it.
        requiredClaims: ["exp"],
      });
      user = this.#userOf(payload);
      const expiresMs = ((payload.exp as number) + this.#config.clockToleranceSeconds) * 1000;
      until = Math.min(nowMs + 3_600_000, expiresMs);
    } catch {
      user = undefined;
    }
    if (token.length > MAX_CACHED_TOKEN_LENGTH) return user;
    this.#cache.set(token, { user, until });
    return user;
  }

  #userOf(payload: JWTPayload): VerifiedUser | undefined {
    const id = payload[this.#config.userClaim];
    if (typeof id !== "string" && typeof id !== "number") return undefined;
    const idText = String(id);
    if (idText === "") return undefined;
    const planClaim = this.#config.planClaim;
    const plan = planClaim === undefined ? undefined : payload[planClaim];
    return { id: idText, plan: typeof plan === "string" && plan !== "" ? plan : undefined };
  }
}

/** Reads a user from a header that a trusted layer sets, only where the policy allows it. */
export function userFromTrustedHeader(
  config: TrustedHeaderIdentity,
  request: RequestDescription,
  peerTrusted: boolean,
): VerifiedUser | undefined {
  if (config.from === "trusted-proxies" && !peerTrusted) return undefined;
  const id = readHeader(request.headers, config.user, request.lowerCaseHeaders)?.trim();
  if (id === undefined || id === "") return undefined;
  const plan =
    config.plan === undefined
      ? undefined
      : readHeader(request.headers, config.plan, request.lowerCaseHeaders)?.trim();
  return { id, plan: plan === "" ? undefined : plan };
}
