import type { ErrorCode } from "../core/errors.js";

/** A problem found after the schema passed: a path into the document and what to change. */
export interface RawIssue {
  readonly path: readonly (string | number)[];
  readonly message: string;
  readonly code: ErrorCode;
}
