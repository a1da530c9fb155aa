/**
 * A Redis URL's password never appears in the error that refuses the URL: the message quotes the
 * URL with its credentials hidden, as every store error that carries a URL does (stores/redact.ts).
 */
import { describe, expect, it } from "vitest";
import { storeFromUrl } from "../../src/stores/from-url.js";
import { createRedisClient } from "../../src/stores/redis/client.js";

const SECRET = "s3cret-pa55word";

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("expected the URL to be refused");
}

describe("a refused Redis URL", () => {
  it.each([
    `redis-x://user:${SECRET}@127.0.0.1:6379`,
    `redis://user:${SECRET}@`,
    `redis://:${SECRET}@[::1`,
    `redis+cluster://user:${SECRET}@`,
  ])("names what to write and hides the password: %s", (url) => {
    const message = messageOf(() => createRedisClient(url));
    expect(message).toMatch(/redis/);
    expect(message).not.toContain(SECRET);
    expect(message).toContain("***@");
  });

  it("hides it through storeFromUrl too", async () => {
    const refused = await storeFromUrl(`redis://user:${SECRET}@`).then(
      () => "accepted",
      (error: Error) => error.message,
    );
    expect(refused).not.toContain(SECRET);
  });
});
