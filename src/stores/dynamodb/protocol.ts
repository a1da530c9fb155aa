/**
 * DynamoDB's JSON protocol as the store's code sees it, apart from how a call travels: the
 * client contract the counting code calls (`DynamoDbClient`), the answers and errors, and the
 * credentials. Two clients implement it, `client.ts` over node:https and `fetch-client.ts` over
 * `fetch`; nothing here imports a runtime module, so an edge bundle can hold it.
 */
import type { AwsCredentials } from "../../aws/sigv4-request.js";
import { EdgelimitError } from "../../core/errors.js";
import type { StoreCallProgress, StoreStatus } from "../../core/types.js";
import { redact } from "../redact.js";
import type { RemoteGuard } from "../remote/guard.js";

/** An HTTP answer's status and body, as a client read it. */
export interface RawAnswer {
  readonly status: number;
  readonly text: string;
}

export type AttributeValue = { S: string } | { N: string };

export interface CallOptions {
  /**
   * Whether a call that went out on a kept-alive socket the server had just closed may be sent
   * again (default true; a refund says false). Only the node:https client can tell that case.
   */
  readonly resendOnStaleSocket?: boolean;
  /** Told of a new connection's setup (see `Store.apply`). */
  readonly progress?: StoreCallProgress | undefined;
}

/** What the counting code needs from a client: one operation per call, and its health. */
export interface DynamoDbClient {
  readonly region: string;
  /** The endpoint's calls as health pages show them. */
  readonly guard: RemoteGuard;
  /** Calls one operation (`UpdateItem`, `Query`...) and resolves to its JSON answer. */
  call<T>(operation: string, input: object, options?: CallOptions): Promise<T>;
  status(): StoreStatus;
  /** Ends every call in flight and whatever the client holds open. */
  close(): void;
}

/**
 * Where a client's calls go when they do not go over HTTP. `send` resolves to the operation's
 * answer as DynamoDB JSON, and rejects with a `DynamoDbError` for an error DynamoDB would answer
 * (`ConditionalCheckFailedException`, with `item` when the call asked for
 * `ReturnValuesOnConditionCheckFailure: ALL_OLD`). `region` is the calling client's.
 */
export interface DynamoDbTransport {
  send(
    region: string,
    operation: string,
    input: object,
    progress?: StoreCallProgress,
  ): Promise<unknown>;
}

/** An error DynamoDB answered with: `type` is the short name (`ConditionalCheckFailedException`). */
export class DynamoDbError extends EdgelimitError {
  readonly type: string;
  readonly status: number;
  /** The item as it was, when DynamoDB returns it with a failed condition. */
  readonly item: Record<string, AttributeValue> | undefined;

  constructor(
    type: string,
    status: number,
    message: string,
    item?: Record<string, AttributeValue>,
  ) {
    super("EL_STORE_FAILED", `DynamoDB ${type}: ${message}`);
    this.type = type;
    this.status = status;
    this.item = item;
  }
}

/** AWS's endpoint for a region, when none is given. */
export function endpointFor(region: string): string {
  return `https://dynamodb.${region}.amazonaws.com`;
}

/**
 * One call through the endpoint's guard (breaker, health): `send` sends it and reads the answer.
 * A server error (5xx) is the endpoint failing; any other answer, a failed condition or a
 * throttling error included, is the endpoint working. Resolves to the JSON of a 2xx answer.
 * `sent` are the secret fields the request carried (its signature, a session token): an error
 * quotes the answer with them hidden, in case the endpoint echoed them.
 */
export async function guardedCall<T>(
  guard: RemoteGuard,
  send: (progress: StoreCallProgress | undefined) => Promise<RawAnswer>,
  progress: StoreCallProgress | undefined,
  sent: readonly (string | undefined)[] = [],
): Promise<T> {
  const answer = await guard.run(async (setup) => {
    const answer = await send(setup);
    if (answer.status >= 500) readAnswer(answer.status, answer.text, sent);
    return answer;
  }, progress);
  return readAnswer<T>(answer.status, answer.text, sent);
}

/** The secret fields of a signed request, for `guardedCall`. */
export function secretFields(headers: Readonly<Record<string, string>>): (string | undefined)[] {
  return [headers.authorization, headers["x-amz-security-token"]];
}

/**
 * The answer to a call: its JSON on a 2xx, else the `DynamoDbError` it carries, quoting the
 * answer with `secrets` hidden.
 */
export function readAnswer<T>(
  status: number,
  text: string,
  secrets: readonly (string | undefined)[] = [],
): T {
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    throw new DynamoDbError("InvalidResponse", status, redact(text, secrets).slice(0, 200));
  }
  if (status >= 200 && status < 300) return parsed as T;
  const fullType = String(parsed.__type ?? `HTTP${status}`);
  const type = redact(fullType.slice(fullType.lastIndexOf("#") + 1), secrets);
  const message = redact(String(parsed.message ?? parsed.Message ?? ""), secrets);
  throw new DynamoDbError(
    type,
    status,
    message,
    parsed.Item as Record<string, AttributeValue> | undefined,
  );
}

/** The standard variables (Lambda sets them); missing ones are a mistake to fix, not a failing store. */
export function credentialsFromEnv(
  env: Readonly<Record<string, string | undefined>> | undefined,
): AwsCredentials {
  const accessKeyId = env?.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env?.AWS_SECRET_ACCESS_KEY;
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new EdgelimitError(
      "EL_STORE_OPTION",
      "DynamoDB credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (Lambda sets them) or pass credentials",
    );
  }
  return { accessKeyId, secretAccessKey, sessionToken: env?.AWS_SESSION_TOKEN };
}
