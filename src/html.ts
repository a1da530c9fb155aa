/**
 * Text made safe to write into HTML, for every page the project writes (the challenge page,
 * the reports of replay and simulate): what goes in is whatever a client sent (a path, a user
 * agent, a redirect), in an element or in an attribute quoted either way.
 */

const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** `text` with every character HTML gives a meaning to as its entity, quotes of both kinds. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ENTITIES[char] as string);
}
