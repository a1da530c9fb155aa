/**
 * The pool's side of an answer: a response read whole within its size caps, and node:http's
 * errors said as the store reports them (a connection closed before or during an answer, a
 * malformed response).
 */
import type { ClientRequest, IncomingMessage } from "node:http";
import { EdgelimitError } from "../../core/errors.js";

/** A response head (status line and header fields) larger than this is refused. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** A response body larger than this is refused unless the pool is given another cap. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface HttpResponse {
  readonly status: number;
  /** Field names in lower case; a repeated field's values joined with ", ". */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: Buffer;
}

/**
 * Reads `response` whole into `settle`: header fields joined, the body refused (and the request
 * destroyed) once it passes `maxBodyBytes`, whether announced or as it arrives.
 */
export function readResponse(
  response: IncomingMessage,
  request: ClientRequest,
  maxBodyBytes: number,
  settle: (error: Error | undefined, response?: HttpResponse) => void,
): void {
  const chunks: Buffer[] = [];
  let bytes = Number(response.headers["content-length"] ?? 0);
  const tooLarge = (): boolean => {
    if (bytes <= maxBodyBytes) return false;
    const reason = `malformed HTTP response: body over ${maxBodyBytes} bytes`;
    settle(new EdgelimitError("EL_STORE_FAILED", reason));
    request.destroy();
    return true;
  };
  if (tooLarge()) return;
  bytes = 0;
  response.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (!tooLarge()) chunks.push(chunk);
  });
  response.on("end", () => {
    const fields = new Map<string, string>();
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined) fields.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    settle(undefined, {
      status: response.statusCode ?? 0,
      headers: fields,
      body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks),
    });
  });
  response.on("aborted", () => settle(describeFailure(new Error("aborted"), true)));
  response.on("error", (error) => settle(describeFailure(error, true)));
}

/** An error from node:http, as the store reports it (`received`: any byte of the answer). */
export function describeFailure(error: NodeJS.ErrnoException, received: boolean): EdgelimitError {
  const code = error.code ?? "";
  if (
    code === "HPE_INVALID_EOF_STATE" ||
    (received && (code === "ECONNRESET" || error.message === "aborted"))
  ) {
    return new EdgelimitError("EL_STORE_FAILED", "connection closed in the middle of a response");
  }
  if (code === "HPE_HEADER_OVERFLOW") {
    return new EdgelimitError(
      "EL_STORE_FAILED",
      `malformed HTTP response: header section over ${MAX_HEAD_BYTES} bytes`,
    );
  }
  if (code.startsWith("HPE_")) {
    return new EdgelimitError("EL_STORE_FAILED", `malformed HTTP response: ${error.message}`);
  }
  if (code === "ECONNRESET") {
    return new EdgelimitError("EL_STORE_FAILED", "connection closed before any answer");
  }
  return new EdgelimitError("EL_STORE_FAILED", error.message);
}
