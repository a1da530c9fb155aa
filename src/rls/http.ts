/**
 * The HTTP listener: `POST /json` (a `RateLimitRequest` in JSON: 200 when OK, 429 when over the
 * limit, as envoyproxy/ratelimit answers), `GET /healthcheck`, forward-auth at `/check/PROXY`
 * (see forward-auth.ts), and the policy's challenge page, for a proxy that routes its path here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { EdgelimitError } from "../core/errors.js";
import type { ChallengeHandler, RequestDescription } from "../core/types.js";
import { challengePage } from "../http/guard.js";
import { unavailableBody } from "../http/headers.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import { drainAndClose, RequestsInFlight } from "../node-http/drain.js";
import { listen } from "../node-http/listen.js";
import { toWebRequest, writeWebResponse } from "../node-http/web.js";
import type { RlsAnswer } from "./answer.js";
import { textOfBytes } from "./bytes-text.js";
import { ACTION_HEADER, CHECK_PATH, describeForwarded, forwardAuthAnswer } from "./forward-auth.js";
import { CODE, type RateLimitRequest } from "./messages.js";
import { requestFromJson, responseToJson } from "./protojson.js";

/** A `/json` body larger than this is refused (Envoy's requests are a few hundred bytes). */
const MAX_BODY_BYTES = 64 * 1024;
/** How long the rest of a refused body is read and dropped before the connection is cut. */
const DRAIN_MS = 5_000;
const JSON_TYPE = "application/json";

export interface HttpHandlers {
  shouldRateLimit(
    request: RateLimitRequest,
    peer: string | undefined,
  ): RlsAnswer | Promise<RlsAnswer>;
  /** Undefined when there is no `--policy` (then `/check/PROXY` answers 404). */
  check(request: RequestDescription): Verdict | Promise<Verdict> | undefined;
  healthy(): boolean;
  /** The policy's challenge page and the limiter it resolves clients with, when it has one. */
  challenge(): { readonly handler: ChallengeHandler; readonly limiter: Limiter } | undefined;
  /** Called after each request with its endpoint and status, for metrics. Must not throw. */
  onRequest?(
    endpoint: "json" | "check" | "healthcheck" | "challenge" | "other",
    status: number,
  ): void;
  onError(error: unknown): void;
  /**
   * Called when `/check` cannot believe what a proxy sent (a header missing, a proxy it does
   * not know), with the answer's text, which names no value of the request. Must not throw.
   */
  onCheckRefused?(problem: string): void;
}

export interface HttpListener {
  readonly server: Server;
  readonly port: number;
  readonly inFlight: number;
  /** Stops accepting, lets requests in flight finish (at most `graceMs`), then closes. */
  close(graceMs: number): Promise<void>;
}

export async function startHttp(
  handlers: HttpHandlers,
  host: string,
  port: number,
): Promise<HttpListener> {
  const requests = new RequestsInFlight();
  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    requests.track(res);
    req.on("error", () => undefined);
    handle(handlers, req, res).catch((error: unknown) => {
      handlers.onError(error);
      if (!res.headersSent) send(res, 500, "text/plain", "Internal Server Error\n");
      else res.destroy();
    });
  });
  await listen(server, port, host);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    get inFlight() {
      return requests.count;
    },
    close: (graceMs) => drainAndClose(server, requests, graceMs),
  };
}

async function handle(
  handlers: HttpHandlers,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = req.url ?? "/";
  const queryAt = url.indexOf("?");
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  const peer = req.socket.remoteAddress;
  const done = (endpoint: Parameters<NonNullable<HttpHandlers["onRequest"]>>[0]) => {
    try {
      handlers.onRequest?.(endpoint, res.statusCode);
    } catch {
      // Observers must never change an answer.
    }
  };
  if (path === "/json") {
    await handleJson(handlers, req, res, peer);
    done("json");
    return;
  }
  if (path === "/healthcheck") {
    if (handlers.healthy()) send(res, 200, "text/plain", "OK");
    else send(res, 500, "text/plain", "shutting down");
    done("healthcheck");
    return;
  }
  if (path === CHECK_PATH || path.startsWith(`${CHECK_PATH}/`)) {
    await handleCheck(handlers, req, res, peer, path);
    done("check");
    return;
  }
  const challenge = handlers.challenge();
  if (challenge !== undefined) {
    const description = {
      ip: peer,
      method: req.method,
      path: url,
      headers: req.headers,
      lowerCaseHeaders: true,
    };
    const page = challengePage(challenge.handler, challenge.limiter, description, () =>
      toWebRequest(req),
    );
    if (page !== undefined) {
      await writeWebResponse(res, await page);
      done("challenge");
      return;
    }
  }
  send(
    res,
    404,
    "text/plain",
    "not found: this is edgelimit rls (POST /json, GET /healthcheck, /check/PROXY)\n",
  );
  done("other");
}

async function handleJson(
  handlers: HttpHandlers,
  req: IncomingMessage,
  res: ServerResponse,
  peer: string | undefined,
): Promise<void> {
  if (req.method !== "POST") {
    send(res, 405, "text/plain", "POST a RateLimitRequest as JSON\n", { allow: "POST" });
    return;
  }
  const body = await readBody(req);
  if (body === undefined) {
    // Answered before the rest arrives; what the client still sends is read and dropped (see
    // readBody), so that it reads the answer.
    send(
      res,
      413,
      JSON_TYPE,
      refusalBody("request_too_large", `the body is larger than ${MAX_BODY_BYTES} bytes`),
    );
    return;
  }
  let answer: RlsAnswer;
  try {
    answer = await handlers.shouldRateLimit(requestFromJson(textOfBytes(body)), peer);
  } catch (error) {
    if (!(error instanceof EdgelimitError) || error.code !== "EL_RLS_REQUEST") throw error;
    send(res, 400, JSON_TYPE, refusalBody("invalid_request", error.message));
    return;
  }
  const response = answer.response;
  if (response === undefined) {
    const retryAfter = answer.unavailable?.retryAfterSeconds ?? 1;
    send(res, 503, JSON_TYPE, unavailableBody(retryAfter), { "retry-after": String(retryAfter) });
    return;
  }
  send(
    res,
    response.overallCode === CODE.OVER_LIMIT ? 429 : 200,
    JSON_TYPE,
    responseToJson(response),
  );
}

async function handleCheck(
  handlers: HttpHandlers,
  req: IncomingMessage,
  res: ServerResponse,
  peer: string | undefined,
  path: string,
): Promise<void> {
  // The body of the original request is never needed: drain whatever the proxy sent.
  req.resume();
  const forwarded = describeForwarded(path, req, peer);
  if (forwarded.problem !== undefined) {
    handlers.onCheckRefused?.(forwarded.problem);
    send(res, forwarded.status, "text/plain", forwarded.problem, {
      [ACTION_HEADER]: "unavailable",
    });
    return;
  }
  const decided = handlers.check(forwarded.request);
  if (decided === undefined) {
    send(
      res,
      404,
      "text/plain",
      "/check decides with a policy: start edgelimit rls with --policy FILE\n",
    );
    return;
  }
  const verdict = decided instanceof Promise ? await decided : decided;
  const answer = forwardAuthAnswer(verdict, forwarded.denyWith403);
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}

/**
 * The body, or undefined once it passes `MAX_BODY_BYTES`. Past the limit, nothing more is kept:
 * the rest is read and dropped until the client stops sending, for at most `DRAIN_MS`, then the
 * connection is cut. Closing the connection at once would reset it under a client still
 * sending, which then never reads the 413 (curl's "Empty reply from server", undici's EPIPE).
 */
function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const collect = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) {
        chunks.push(chunk);
        return;
      }
      req.off("data", collect);
      chunks.length = 0;
      req.resume();
      const cut = setTimeout(() => req.destroy(), DRAIN_MS);
      cut.unref();
      req.once("end", () => clearTimeout(cut));
      req.once("close", () => clearTimeout(cut));
      resolve(undefined);
    };
    req.on("data", collect);
    req.on("end", () => resolve(size <= MAX_BODY_BYTES ? Buffer.concat(chunks) : undefined));
    req.on("error", reject);
  });
}

/** A refusal of `POST /json` as JSON, in the shape of the limiter's own refusals. */
function refusalBody(error: string, message: string): string {
  return JSON.stringify({ error, message });
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": String(Buffer.byteLength(body)),
    ...extra,
  });
  res.end(body);
}
