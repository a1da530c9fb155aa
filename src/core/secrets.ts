import { EdgelimitError } from "./errors.js";
import type { SecretSource } from "./model.js";

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
