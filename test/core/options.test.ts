import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import {
  checkArgument,
  checkOptions,
  fields,
  type OptionsShape,
  oneOf,
  required,
} from "../../src/core/options.js";

interface Example {
  readonly target: string;
  readonly retries?: number;
  readonly onError?: ((error: unknown) => void) | false;
  readonly breaker?: { readonly failureThreshold?: number; readonly cooldownMs?: number } | false;
  readonly mode?: "fast" | "safe";
}

const EXAMPLE = {
  target: required("string"),
  retries: "number",
  onError: ["function", false],
  breaker: [false, fields({ failureThreshold: "number", cooldownMs: "number" })],
  mode: oneOf("fast", "safe"),
} satisfies OptionsShape<Example>;

function problem(options: unknown): EdgelimitError {
  try {
    checkOptions("example", options, EXAMPLE);
  } catch (error) {
    if (error instanceof EdgelimitError) return error;
    throw error;
  }
  throw new Error("accepted");
}

describe("checkOptions", () => {
  it("accepts options of the right kinds, and a known option set to undefined as absent", () => {
    expect(() =>
      checkOptions(
        "example",
        { target: "x", retries: 2, onError: false, breaker: { cooldownMs: 5 }, mode: "safe" },
        EXAMPLE,
      ),
    ).not.toThrow();
    expect(() =>
      checkOptions("example", { target: "x", retries: undefined }, EXAMPLE),
    ).not.toThrow();
  });

  it("names a misspelt option with the one meant, in any case, and with a swap of two letters", () => {
    expect(problem({ target: "x", retires: 2 }).message).toBe(
      "example: unknown option `retires`: did you mean `retries`?",
    );
    expect(problem({ target: "x", OnError: false }).message).toBe(
      "example: unknown option `OnError`: did you mean `onError`?",
    );
  });

  it("lists the options when no known one is close", () => {
    expect(problem({ target: "x", verbose: true }).message).toBe(
      "example: unknown option `verbose`; the options are `target`, `retries`, `onError`, `breaker`, `mode`",
    );
  });

  it("refuses an unknown option whatever its value, undefined included", () => {
    expect(problem({ target: "x", retires: undefined }).issues.map((issue) => issue.path)).toEqual([
      "retires",
    ]);
  });

  it("checks the fields of an object option, naming them by their path", () => {
    const error = problem({ target: "x", breaker: { failureThresh: 3, cooldownMs: "1s" } });
    expect(error.message).toBe(
      "example: 2 problems with its options\n  unknown option `breaker.failureThresh`: did you mean `breaker.failureThreshold`?\n  `breaker.cooldownMs` must be a number; got a string",
    );
    expect(error.issues.map((issue) => issue.path)).toEqual([
      "breaker.failureThresh",
      "breaker.cooldownMs",
    ]);
  });

  it("names every accepted kind, and one of a few values", () => {
    expect(problem({ target: "x", onError: true }).message).toBe(
      "example: `onError` must be a function or false; got true",
    );
    expect(problem({ target: "x", mode: "quick" }).message).toBe(
      'example: `mode` must be "fast" or "safe"; got a string',
    );
  });

  it("says what is required when the options are missing or not an object", () => {
    expect(problem(undefined).message).toBe(
      "example: options must be an object with `target`; got undefined",
    );
    expect(problem(["target"]).message).toBe(
      "example: options must be an object with `target`; got an array",
    );
    expect(() => checkOptions("example", undefined, { retries: "number" })).not.toThrow();
  });

  it("carries the code it is given, EL_BAD_OPTION by default", () => {
    expect(problem({}).code).toBe("EL_BAD_OPTION");
    expect(() =>
      checkOptions("store", { maxKey: 1 }, { maxKeys: "number" }, { code: "EL_STORE_OPTION" }),
    ).toThrow(expect.objectContaining({ code: "EL_STORE_OPTION" }));
  });

  it("says what another library's option is here, before guessing a near one", () => {
    expect(() =>
      checkOptions("example", { target: "x", retry: 3 }, EXAMPLE, {
        foreign: { retry: "got's `retry` is `retries` here" },
      }),
    ).toThrow("example: unknown option `retry`: got's `retry` is `retries` here");
  });

  it("checkArgument: names a positional argument of the wrong kind", () => {
    expect(() => checkArgument("wrap", "the handler (first argument)", {}, "function")).toThrow(
      "wrap: the handler (first argument) must be a function; got an object",
    );
    expect(() => checkArgument("wrap", "the handler", () => {}, "function")).not.toThrow();
  });
});

// The shape is held to the interface by the compiler: a key missing, or a required key written
// as optional, does not compile (`npm run typecheck`).
// @ts-expect-error: `retries` is missing.
const missing: OptionsShape<{ target: string; retries?: number }> = { target: required("string") };
// @ts-expect-error: `target` is required by the type, so the shape must say so.
const loose: OptionsShape<{ target: string }> = { target: "string" };
void missing;
void loose;
