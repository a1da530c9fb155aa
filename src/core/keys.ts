/**
 * Counter keys are `<subject>|<namespace>|<scope>` with each part escaped, so two different
 * subjects, namespaces or scopes can never produce the same key, whatever characters a user
 * id or a path contains. `%`, `|`, `:`, `{` and `}` are percent-escaped: `|` separates parts,
 * `:` separates a subject's kind from its value, and braces are kept free for Redis Cluster
 * hash tags.
 *
 * A lone UTF-16 surrogate (a byte that was not UTF-8, as rls decodes one; JSON's `"\udcff"`) is
 * written `%uDCFF`: it has no UTF-8 form, and a store that writes keys as UTF-8 (Redis, DynamoDB)
 * would write every one of them as U+FFFD, making two values one counter.
 */
const SPECIAL = /[%|:{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const HAS_SPECIAL = /[%|:{}\uD800-\uDFFF]/;

export function escapeKeyPart(part: string): string {
  if (!HAS_SPECIAL.test(part)) return part;
  return part.replace(SPECIAL, (char) => {
    const code = char.charCodeAt(0).toString(16).toUpperCase();
    return code.length > 2 ? `%u${code}` : `%${code}`;
  });
}

export type SubjectKind = "ip" | "user";

/** `ip:203.0.113.7`, `ip:2001:db8::/64` (escaped), `user:u_abc`. */
export function subjectKey(kind: SubjectKind, value: string): string {
  return `${kind}:${escapeKeyPart(value)}`;
}

export function counterKey(subject: string, namespace: string, scope: string): string {
  return `${subject}|${escapeKeyPart(namespace)}|${escapeKeyPart(scope)}`;
}
