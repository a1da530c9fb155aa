/**
 * The policy's input as TypeScript sees it (`definePolicy`), where the schema's own types are
 * looser than what it accepts: a duration is a string to zod, and a rule is anything until its
 * number shorthand is read. These say what `core/duration.ts` accepts, so that `"60 seconds"`
 * or `window: 60` does not compile, and a window computed in code (`${seconds}s`) does; the
 * loader checks the rest (`"1.5s"` compiles and is refused there, with the spelling to use).
 */

/** A whole number and a unit: `"500ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`, `"1w"`. */
export type Duration = `${number}${"ms" | "s" | "m" | "h" | "d" | "w"}`;

/** A rule's window: a duration, or calendar months (`"1mo"`). */
export type WindowDuration = Duration | `${number}mo`;

/** `budget`: a duration, or a bare number of milliseconds (`budget: 50`). */
export type Budget = Duration | number;
