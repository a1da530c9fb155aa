/**
 * The canonical path and its spellings (src/core/path.ts), as properties over paths a client
 * could send: every way of writing one route matches the rule written for it, and the form is
 * stable, printable and never less strict than the origin's own routing.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Identity } from "../../src/core/identify.js";
import { RuleMatcher } from "../../src/core/match.js";
import { normalizePath, spellingsOf } from "../../src/core/path.js";
import { definePolicy } from "../../src/policy/load.js";

const ANONYMOUS: Identity = {
  tier: "anonymous",
  plan: undefined,
  ipSubject: "ip:203.0.113.7",
  userSubject: undefined,
  address: undefined,
};

/** Characters a path segment may hold, weighted to the ones that need care. */
const segmentCharacter = fc.oneof(
  fc.constantFrom("a", "b", "E", "x", "Z", "0", "9", "-", "_", "~", "é", "É", "商", "😀", " ", "+"),
  fc.constantFrom("!", "$", "&", "'", "(", ")", "*", ",", "=", ":", "@", "|", "[", "]", "^"),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }),
);

/** A segment as a policy author writes it: no `/`, `\`, `%`, `;`, `?`, `#` and no dot segment. */
const segment = fc
  .array(segmentCharacter, { minLength: 1, maxLength: 8 })
  .map((characters) => characters.join(""))
  .filter(
    (text) =>
      !/[/\\%;?#\p{Cc}]/u.test(text) && text !== "." && text !== ".." && text.trim() === text,
  );

/** A path as written in a policy: `/préférences/a b`. */
const writtenPath = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((segments) => `/${segments.join("/")}`);

/** How a URL parser sends a written path (what `new URL` gives a fetch runtime). */
function asSent(path: string): string {
  return new URL(`http://example.test${path}`).pathname;
}

/** A way a client may respell a path the origin routes the same; `choose` is its coin. */
type Respelling = (path: string, choose: () => boolean) => string;

/** Coins for a respelling, drawn by fast-check so that a failure shrinks and replays. */
const coins = fc.array(fc.boolean(), { minLength: 1, maxLength: 32 }).map((drawn) => {
  let next = 0;
  return () => drawn[next++ % drawn.length] as boolean;
});

const RESPELLINGS: Record<string, Respelling> = {
  "escapes in lower case": (path) =>
    path.replace(/%[0-9A-F]{2}/g, (escaped) => escaped.toLowerCase()),
  "escapes in mixed case": (path, choose) =>
    path.replace(/%[0-9A-F]{2}/g, (escaped) => (choose() ? escaped.toLowerCase() : escaped)),
  "unreserved characters escaped": (path, choose) =>
    path.replace(/%[0-9A-F]{2}|[A-Za-z0-9\-._~]/g, (part) =>
      part.length === 1 && choose() ? `%${part.charCodeAt(0).toString(16).padStart(2, "0")}` : part,
    ),
  "a doubled slash": (path) => path.replace("/", "//"),
  "a dot segment": (path) => path.replace(/\/([^/]*)$/, "/./$1"),
  "a detour through ..": (path) => path.replace(/\/([^/]*)$/, "/elsewhere/../$1"),
  backslashes: (path) => path.replace(/\//g, "\\"),
  "a query and a fragment": (path) => `${path}?q=%2F..#top`,
  // As a proxy may pass it on decoded (the written segments hold no %, /, ?, #).
  "every escape decoded": (path) => decodeURIComponent(path),
};

const respelling = fc.constantFrom(...Object.keys(RESPELLINGS));

describe("the canonical path", () => {
  it("is stable: normalising it again changes nothing", () => {
    const anything = fc.string({
      unit: fc.oneof(
        fc.constantFrom("/", ".", "%", "\\", ";", "?", "#", "a", "A", "2", "e", "E", "f", "F"),
        fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
      ),
      maxLength: 24,
    });
    fc.assert(
      fc.property(anything, (raw) => {
        const once = normalizePath(raw);
        expect(normalizePath(once)).toBe(once);
      }),
      { numRuns: 10_000 },
    );
  });

  it("is printable ASCII starting with /, with no query, fragment or character a URL parser escapes", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 24 }), (raw) => {
        const path = normalizePath(raw);
        // Every % starts an escape, in upper case, of a character that is not unreserved.
        const badEscape = (path.match(/%.{0,2}/g) ?? []).find(
          (escaped) =>
            !/^%[0-9A-F]{2}$/.test(escaped) ||
            /[A-Za-z0-9\-._~]/.test(String.fromCharCode(Number.parseInt(escaped.slice(1), 16))),
        );
        const printable = /^\/[\x21-\x7e]*$/.test(path) && !/[?#"<>`{}\\]/.test(path);
        expect({ path, printable, badEscape }).toEqual({
          path,
          printable: true,
          badEscape: undefined,
        });
      }),
      { numRuns: 10_000 },
    );
  });

  it("is one form for a written path, the URL parser's, and every respelling of them", () => {
    fc.assert(
      fc.property(writtenPath, respelling, coins, (written, name, choose) => {
        const canonical = normalizePath(written);
        const sent = asSent(written);
        expect(normalizePath(sent)).toBe(canonical);
        const respelled = (RESPELLINGS[name] as Respelling)(sent, choose);
        expect(normalizePath(respelled), `${written} as ${respelled} (${name})`).toBe(canonical);
      }),
      { numRuns: 10_000 },
    );
  });
});

describe("matching a rule's path", () => {
  it("matches a rule written with any characters, however a client spells the path", () => {
    fc.assert(
      fc.property(writtenPath, respelling, coins, (written, name, choose) => {
        const matcher = new RuleMatcher(
          definePolicy({ tiers: { anonymous: { paths: { [written]: 5 } } } }),
        );
        const respelled = (RESPELLINGS[name] as Respelling)(asSent(written), choose);
        for (const routing of [true, false, undefined]) {
          const match = matcher.match(ANONYMOUS, normalizePath(respelled), {
            caseSensitiveRouting: routing,
          });
          expect(
            match.rules.map((rule) => rule.id),
            `${written} sent as ${respelled} (${name}, ${routing})`,
          ).toEqual([`anonymous.path.${written}`]);
        }
      }),
      { numRuns: 3_000 },
    );
  });

  it("matches every casing unless the origin routes case exactly", () => {
    fc.assert(
      fc.property(writtenPath, coins, (written, choose) => {
        const matcher = new RuleMatcher(
          definePolicy({ tiers: { anonymous: { paths: { [written]: 5 } } } }),
        );
        const sent = asSent(written);
        // Flip the case of ASCII letters outside escapes (an escape's hex digits are escapes).
        const recased = sent.replace(/%[0-9A-F]{2}|[A-Za-z]/g, (part) =>
          part.length > 1 || !choose()
            ? part
            : part === part.toLowerCase()
              ? part.toUpperCase()
              : part.toLowerCase(),
        );
        const id = `anonymous.path.${written}`;
        for (const routing of [false, undefined]) {
          const match = matcher.match(ANONYMOUS, normalizePath(recased), {
            caseSensitiveRouting: routing,
          });
          expect(match.rules.map((rule) => rule.id)).toEqual([id]);
        }
        const exact = matcher.match(ANONYMOUS, normalizePath(recased), {
          caseSensitiveRouting: true,
        });
        expect(exact.rules.length === 1).toBe(recased === sent);
      }),
      { numRuns: 3_000 },
    );
  });

  it("where the origin's routing is unknown, counts at least what either kind of origin would", () => {
    const pathPart = fc.constantFrom("api", "API", "Api", "public", "Public", "x", "é", "a;b");
    const prefix = fc
      .array(pathPart, { minLength: 1, maxLength: 3 })
      .chain((parts) => fc.constantFrom(`/${parts.join("/")}`, `/${parts.join("/")}/`));
    const request = fc
      .array(fc.oneof(pathPart, fc.constantFrom("..;", ".", "..", "b;x=1")), { maxLength: 4 })
      .map((parts) => `/${parts.join("/")}`);
    fc.assert(
      fc.property(fc.uniqueArray(prefix, { minLength: 1, maxLength: 4 }), request, (keys, raw) => {
        const paths = Object.fromEntries(keys.map((key, i) => [key, i + 1]));
        const matcher = new RuleMatcher(definePolicy({ tiers: { anonymous: { paths } } }));
        const path = normalizePath(raw);
        const ids = (routing: boolean | undefined) =>
          matcher
            .match(ANONYMOUS, path, { caseSensitiveRouting: routing })
            .rules.map((rule) => rule.id);
        const unknown = ids(undefined);
        for (const known of [true, false]) {
          for (const id of ids(known)) expect(unknown, `${raw}: ${known}`).toContain(id);
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it("spells a path without its matrix parameters, and in lower case as the routing says", () => {
    expect(spellingsOf("/Api/export;jsessionid=1", true)).toEqual([
      { path: "/Api/export;jsessionid=1", folded: false },
      { path: "/Api/export", folded: false },
    ]);
    expect(spellingsOf("/Api/..;/admin", false)).toEqual([
      { path: "/api/..;/admin", folded: true },
      { path: "/admin", folded: true },
    ]);
    expect(spellingsOf("/Api", undefined)).toEqual([
      { path: "/Api", folded: false },
      { path: "/api", folded: true },
    ]);
  });
});

describe("normalizePath, by example", () => {
  it.each([
    ["/caf%c3%a9", "/caf%C3%A9"],
    ["/café", "/caf%C3%A9"],
    ["/%61pi/%7euser", "/api/~user"],
    ["/a%2fb", "/a%2Fb"],
    ["/a/%2e%2E/b", "/b"],
    ["/100%", "/100%25"],
    ["/%zz", "/%25zz"],
    ["/a b", "/a%20b"],
    ['/"<>`{}', "/%22%3C%3E%60%7B%7D"],
    ["/😀", "/%F0%9F%98%80"],
    ["/\uD800x", "/%EF%BF%BDx"],
    ["/a\r\nb", "/a%0D%0Ab"],
    ["/api/export;jsessionid=1", "/api/export;jsessionid=1"],
  ])("%j is %j", (raw, canonical) => {
    expect(normalizePath(raw)).toBe(canonical);
  });
});
