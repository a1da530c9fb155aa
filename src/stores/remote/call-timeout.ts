import { timeoutAfterPendingIo } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";

/**
 * The call's answer, or `EL_STORE_TIMEOUT` when none came within `timeoutMs` of sending it. A
 * reply already in this process, waiting behind our own work, is read before the call is
 * declared lost (`timeoutAfterPendingIo`), as the decision budget does: a client's own command
 * timeout, a plain timer, would not. `what` names the server in the message (`redis`).
 */
export function answeredInTime<T>(call: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const cancel = timeoutAfterPendingIo(
      timeoutMs,
      () => settled,
      () => {
        settled = true;
        reject(
          new EdgelimitError("EL_STORE_TIMEOUT", `${what} did not answer within ${timeoutMs} ms`),
        );
      },
    );
    call.then(
      (reply) => {
        if (settled) return;
        settled = true;
        cancel();
        resolve(reply);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        cancel();
        reject(error);
      },
    );
  });
}
