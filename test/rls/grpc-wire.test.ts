import { describe, expect, it } from "vitest";
import { percentEncoded, timeoutMs, tooLarge, unaryMessage } from "../../src/rls/grpc-wire.js";

/** gRPC's wire rules the listener applies before a message reaches the codec. */

const message = (body: string, flag = 0) => {
  const bytes = Buffer.from(body);
  const frame = Buffer.alloc(5 + bytes.length);
  frame[0] = flag;
  frame.writeUInt32BE(bytes.length, 1);
  bytes.copy(frame, 5);
  return frame;
};
const PATH = "/svc/Method";

describe("gRPC's wire rules", () => {
  it("reads grpc-timeout's units, and calls anything else not a timeout", () => {
    expect(timeoutMs(undefined)).toBeUndefined();
    expect(timeoutMs("20m")).toBe(20);
    expect(timeoutMs("2S")).toBe(2000);
    expect(timeoutMs("1H")).toBe(3_600_000);
    expect(timeoutMs("1M")).toBe(60_000);
    expect(timeoutMs("1500u")).toBe(1.5);
    expect(timeoutMs("99999999n")).toBeCloseTo(99.999999);
    for (const bad of ["", "m", "20", "20x", "-1m", "123456789m", "2 m", "1.5S"]) {
      expect(timeoutMs(bad), bad).toBeNaN();
    }
  });

  it("percent-encodes grpc-message: %, and every byte outside printable ASCII", () => {
    expect(percentEncoded('unknown service "x"')).toBe('unknown service "x"');
    expect(percentEncoded("100% é\n")).toBe("100%25 %C3%A9%0A");
    expect(percentEncoded("\udcff")).toBe("%EF%BF%BD");
  });

  it("finds the one message of a unary call, or says why there is none", () => {
    expect(unaryMessage(message("abc"), undefined, 1024, PATH)).toEqual(Buffer.from("abc"));
    expect(unaryMessage(Buffer.alloc(0), undefined, 1024, PATH)).toMatchObject({
      status: "UNIMPLEMENTED",
    });
    expect(unaryMessage(message("abc").subarray(0, 6), undefined, 1024, PATH)).toMatchObject({
      status: "INTERNAL",
    });
    const two = Buffer.concat([message("a"), message("b")]);
    expect(unaryMessage(two, undefined, 1024, PATH)).toMatchObject({ status: "UNIMPLEMENTED" });
    expect(unaryMessage(message("abc", 1), undefined, 1024, PATH)).toMatchObject({
      status: "INTERNAL",
    });
    expect(unaryMessage(message("abc", 2), "gzip", 1024, PATH)).toMatchObject({
      status: "INTERNAL",
    });
    expect(unaryMessage(message("not gzip", 1), "gzip", 1024, PATH)).toMatchObject({
      status: "INTERNAL",
    });
  });

  it("refuses a message longer than the bound from its prefix, before the rest arrives", () => {
    const head = Buffer.from([0, 0, 0x10, 0, 1]); // declares 1 MiB + 1
    expect(tooLarge(head, 5, 1024 * 1024)).toMatchObject({ status: "RESOURCE_EXHAUSTED" });
    expect(tooLarge(message("abc"), 8, 1024)).toBeUndefined();
    expect(tooLarge(message("a".repeat(600)), 1300, 1024)).toMatchObject({
      status: "RESOURCE_EXHAUSTED",
    });
  });
});
