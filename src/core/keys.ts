/**
 * Counter keys are `<subject>|<namespace>|<scope>` with each part escaped, so two different
 * subjects, namespaces or scopes can never produce the same key, whatever characters a user
 * id or a path contains. `%`, `|`, `:`, `{` and `}` are percent-escaped: `|` separates parts,
 * `:` separates a subject's kind from its value, and braces are kept free for Redis Cluster
 * hash tags.
 */
const SPECIAL = /[%|:{}]/g;
const HAS_SPECIAL = /[%|:{}]/;

export function escapeKeyPart(part: string): string {
  if (!HAS_SPECIAL.test(part)) return part;
  return part.replace(SPECIAL, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

export type SubjectKind = "ip" | "user";

/** `ip:203.0.113.7`, `ip:2001:db8::/64` (escaped), `user:u_abc`. */
export function subjectKey(kind: SubjectKind, value: string): string {
  return `${kind}:${escapeKeyPart(value)}`;
}

export function counterKey(subject: string, namespace: string, scope: string): string {
  return `${subject}|${escapeKeyPart(namespace)}|${escapeKeyPart(scope)}`;
}
