/** Errors of `edgelimit replay`, each with a stable code (the core's codes are for the core). */
export type ReplayErrorCode =
  | "EL_REPLAY_ARGUMENT"
  | "EL_REPLAY_UNKNOWN_FORMAT"
  | "EL_REPLAY_INPUT"
  | "EL_REPLAY_TOO_MANY_ERRORS";

export class ReplayError extends Error {
  readonly code: ReplayErrorCode;

  constructor(code: ReplayErrorCode, message: string) {
    super(message);
    this.name = "ReplayError";
    this.code = code;
  }
}
