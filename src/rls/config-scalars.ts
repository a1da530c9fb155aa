/**
 * Which plain (unquoted, untagged) scalars envoyproxy/ratelimit refuses as values. It reads a
 * file with Go's yaml.v2 into generic maps first and accepts only strings, integers, booleans
 * and nulls as leaves, so a scalar yaml.v2 types as a float (`1.5`, `1e3`, `.5`, `.inf`, `08`,
 * which is not octal) or as an unsigned 64-bit integer beyond int64 (`9223372036854775808`)
 * stops the load, wherever it stands, even where a string is expected. The typing here follows
 * yaml.v2's resolver: special floats by name; then, for a scalar that starts with a digit or a
 * sign, an integer in Go's syntax (`0x`, `0o`, `0b`, a leading `0` for octal; underscores
 * dropped), else a decimal float that Go can parse.
 */

export type RefusedNumber = "decimal" | "beyond-int64";

const SPECIAL_FLOATS = new Set([
  ".inf",
  ".Inf",
  ".INF",
  "+.inf",
  "+.Inf",
  "+.INF",
  "-.inf",
  "-.Inf",
  "-.INF",
  ".nan",
  ".NaN",
  ".NAN",
]);

/** yaml.v2's `yamlStyleFloat`, for a scalar that starts with a digit or a sign. */
const DECIMAL_FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
/** What `strconv.ParseFloat` takes of a scalar that starts with a dot. */
const DOT_FLOAT = /^\.[0-9]+(?:[eE][-+]?[0-9]+)?$/;
/** Go's integer literals, as `strconv.ParseInt(s, 0, 64)` reads them (underscores removed). */
const GO_INTEGER =
  /^([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]+)|([1-9][0-9]*|0))$/;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Why envoyproxy/ratelimit would refuse this plain scalar, or undefined when it takes it. */
export function refusedNumber(source: string): RefusedNumber | undefined {
  if (SPECIAL_FLOATS.has(source)) return "decimal";
  const first = source.charAt(0);
  if (first === ".") return DOT_FLOAT.test(source) && finite(source) ? "decimal" : undefined;
  if (!/[-+0-9]/.test(first)) return undefined;
  const plain = source.replaceAll("_", "");
  const integer = goInteger(plain);
  if (integer !== undefined) {
    return integer >= INT64_MIN && integer <= INT64_MAX ? undefined : "beyond-int64";
  }
  // Go's ParseFloat fails on a value beyond float64's range, and the scalar stays a string.
  return DECIMAL_FLOAT.test(plain) && finite(plain) ? "decimal" : undefined;
}

function goInteger(plain: string): bigint | undefined {
  const match = GO_INTEGER.exec(plain);
  if (match === null) return undefined;
  const [, sign, hex, octal, binary, legacyOctal, decimal] = match;
  let magnitude: bigint;
  if (hex !== undefined) magnitude = BigInt(`0x${hex}`);
  else if (octal !== undefined) magnitude = BigInt(`0o${octal}`);
  else if (binary !== undefined) magnitude = BigInt(`0b${binary}`);
  else if (legacyOctal !== undefined) magnitude = BigInt(`0o${legacyOctal}`);
  else magnitude = BigInt(decimal as string);
  return sign === "-" ? -magnitude : magnitude;
}

function finite(text: string): boolean {
  return Number.isFinite(Number(text));
}
