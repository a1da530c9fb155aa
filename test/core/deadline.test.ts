import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { timeoutAfterPendingIo, withinBudget } from "../../src/core/deadline.js";
import { EdgelimitError } from "../../src/core/errors.js";

/** Keeps the event loop busy, as a burst of our own work does. */
function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

const times = { budgetMs: 20, connectBudgetMs: 1000, expectedRoundTripMs: 0 };

describe("the decision budget measures the store, not us", () => {
  // A loopback "store" in a process of its own (as Redis is) that echoes at once.
  let store: ChildProcess;
  let socket: Socket;
  beforeAll(async () => {
    store = spawn(
      process.execPath,
      [
        "-e",
        `const s = require("node:net").createServer((p) => p.on("data", (d) => p.write(d)));
         s.listen(0, "127.0.0.1", () => console.log(s.address().port));`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const [line] = (await once(store.stdout as NodeJS.ReadableStream, "data")) as [Buffer];
    socket = connect(Number(line.toString().trim()), "127.0.0.1");
    await once(socket, "connect");
  });
  afterAll(() => {
    socket?.destroy();
    store?.kill();
  });

  /** One request to the echo store: resolves when its answer is read. */
  const ask = (): Promise<string> =>
    new Promise((resolve) => {
      socket.once("data", (data) => resolve(data.toString()));
      socket.write("ping");
    });

  it("uses a reply that arrived in time but waited behind our own work past the budget", async () => {
    const answer = withinBudget(() => ask(), times, "echo");
    // The reply is back in microseconds; we then hold the loop for 5x the budget, so the budget
    // timer is due before the reply is read. A plain setTimeout race would fail open here.
    busyFor(100);
    await expect(answer).resolves.toBe("ping");
  });

  it("gives the store back the time we were too busy to send its request", async () => {
    // A client that writes on the next loop turn (ioredis's auto-pipelining does), and a loop
    // held past the budget before that turn comes: the request leaves late, by our fault.
    const sentLate = (): Promise<string> =>
      new Promise((resolve) => {
        socket.once("data", (data) => resolve(data.toString()));
        setImmediate(() => socket.write("late"));
      });
    const answer = withinBudget(() => sentLate(), times, "echo");
    busyFor(100);
    await expect(answer).resolves.toBe("late");
  });

  it("gives up on a store that has really not answered, soon after the budget", async () => {
    const started = performance.now();
    const never = new Promise<string>(() => {});
    const error = await withinBudget(() => never, times, "stalled").catch((e: unknown) => e);
    const waited = performance.now() - started;
    expect(error).toBeInstanceOf(EdgelimitError);
    expect((error as EdgelimitError).code).toBe("EL_STORE_TIMEOUT");
    expect((error as Error).message).toContain('store "stalled" did not answer within 20 ms');
    expect(waited).toBeGreaterThanOrEqual(19);
    expect(waited).toBeLessThan(20 + 20);
  });

  it("does not run the budget while the store sets up a connection", async () => {
    const answer = withinBudget(
      (progress) =>
        new Promise<string>((resolve) => {
          const connected = progress.connecting();
          // A slow handshake (8x the budget), then a prompt answer.
          setTimeout(() => {
            connected();
            setTimeout(() => resolve("counted"), 5);
          }, 160);
        }),
      times,
      "cold",
    );
    await expect(answer).resolves.toBe("counted");
  });

  it("runs the budget from the end of the setup, and bounds the setup by its own budget", async () => {
    const afterSetup = withinBudget(
      (progress) =>
        new Promise<string>(() => {
          const connected = progress.connecting();
          setTimeout(connected, 60);
        }),
      times,
      "silent",
    );
    const started = performance.now();
    await expect(afterSetup).rejects.toThrow('store "silent" did not answer within 20 ms');
    // Two timers one after the other (the setup's 60 ms, then the budget's 20), each of which
    // libuv may fire up to 1 ms early by performance.now (its loop clock is whole milliseconds).
    expect(performance.now() - started).toBeGreaterThanOrEqual(60 + 20 - 2);

    const stuck = withinBudget(
      (progress) =>
        new Promise<string>(() => {
          progress.connecting();
        }),
      { ...times, connectBudgetMs: 80 },
      "unreachable",
    );
    await expect(stuck).rejects.toThrow(
      'store "unreachable" could not set up a connection within 80 ms',
    );
  });

  it("adds the known round trip to a far replica to the budget", async () => {
    const far = (): Promise<string> =>
      new Promise((resolve) => setTimeout(() => resolve("from afar"), 60));
    await expect(withinBudget(far, times, "far")).rejects.toThrow("did not answer within 20 ms");
    await expect(withinBudget(far, { ...times, expectedRoundTripMs: 70 }, "far")).resolves.toBe(
      "from afar",
    );
  });

  it("passes the store's own failure through unchanged", async () => {
    const failure = new EdgelimitError("EL_STORE_FAILED", "connection refused");
    await expect(withinBudget(() => Promise.reject(failure), times, "down")).rejects.toBe(failure);
  });

  it("gives store timers the same rule: a reply already here is read before a timeout", async () => {
    let settled = false;
    let timedOut = false;
    ask().then(() => {
      settled = true;
    });
    const cancel = timeoutAfterPendingIo(
      10,
      () => settled,
      () => {
        timedOut = true;
      },
    );
    busyFor(50);
    await new Promise((resolve) => setTimeout(resolve, 30));
    cancel();
    expect(settled).toBe(true);
    expect(timedOut).toBe(false);
  });
});

describe("the decision budget on an injected scheduler", () => {
  /** A scheduler whose time moves only when the test says so. */
  function manualScheduler() {
    let now = 0;
    const timers: { due: number; callback: () => void; live: boolean }[] = [];
    const io: (() => void)[] = [];
    return {
      scheduler: {
        now: () => now,
        setTimeout(callback: () => void, ms: number) {
          const timer = { due: now + ms, callback, live: true };
          timers.push(timer);
          return timer;
        },
        clearTimeout(handle: unknown) {
          (handle as { live: boolean }).live = false;
        },
        afterPendingIo(callback: () => void) {
          io.push(callback);
        },
      },
      advance(to: number) {
        now = to;
        for (const timer of timers) {
          if (timer.live && timer.due <= now) {
            timer.live = false;
            timer.callback();
          }
        }
        while (io.length > 0) (io.shift() as () => void)();
      },
    };
  }

  it("times out on the scheduler's clock and timers, never the runtime's", async () => {
    const manual = manualScheduler();
    let settled = false;
    const answer = withinBudget(
      () => new Promise<string>(() => {}),
      times,
      "virtual",
      manual.scheduler,
    );
    answer.catch(() => {
      settled = true;
    });
    manual.advance(19);
    await Promise.resolve();
    expect(settled).toBe(false);
    manual.advance(20);
    await expect(answer).rejects.toThrow('store "virtual" did not answer within 20 ms');
  });

  it("resolves with an answer that came in time, and clears its timer", async () => {
    const manual = manualScheduler();
    let reply: (value: string) => void = () => {};
    const answer = withinBudget(
      () => new Promise<string>((resolve) => (reply = resolve)),
      times,
      "virtual",
      manual.scheduler,
    );
    manual.advance(10);
    reply("pong");
    await expect(answer).resolves.toBe("pong");
    manual.advance(100);
  });
});
