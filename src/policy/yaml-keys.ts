/**
 * Keys written twice in one mapping of a parsed YAML document. YAML forbids them, yet readers
 * differ on what they do with one: Go's yaml.v2 (envoyproxy/ratelimit's reader) keeps the last
 * value, this package's parser, told to go on, the first. Either way a value the author wrote
 * is dropped without a word, so the loaders refuse them, naming the key's path and both lines.
 */
import { isAlias, isMap, isScalar, isSeq, type LineCounter, type Node, type Pair } from "yaml";

export interface RepeatedKey {
  /** The repeated key's path: map keys, and list indices as numbers. */
  readonly path: readonly (string | number)[];
  /** The line of the repetition. */
  readonly line: number;
  /** The line where the key first appears in the same mapping. */
  readonly firstLine: number;
}

/**
 * Every repetition, in document order. Keys are compared as the parser resolved them (in YAML
 * 1.1 `yes` and `true` are one key, `010` and `8` too; `1` and `"1"` are two). Aliases are not
 * followed: the anchored node is checked where it is written. The walk keeps its own stack, so
 * a deeply nested file cannot exhaust the call stack.
 */
export function repeatedKeys(root: Node | null, lines: LineCounter): RepeatedKey[] {
  const found: RepeatedKey[] = [];
  const lineOf = (node: Node | null): number => {
    const offset = node?.range?.[0];
    return offset === undefined ? 1 : lines.linePos(offset).line;
  };
  const pending: { node: Node | null; path: (string | number)[] }[] = [{ node: root, path: [] }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { node, path } = next;
    if (node === null || isAlias(node)) continue;
    if (isSeq(node)) {
      node.items.forEach((item, index) => {
        pending.push({ node: item as Node | null, path: [...path, index] });
      });
      continue;
    }
    if (!isMap(node)) continue;
    const seen = new Map<unknown, Node>();
    for (const pair of node.items as Pair<Node | null, Node | null>[]) {
      const key = pair.key;
      const name = isScalar(key) ? key.value : undefined;
      const here = [...path, String(name ?? "?")];
      pending.push({ node: pair.value, path: here });
      // A map or list used as a key is compared by identity only, as the parser compares it.
      if (!isScalar(key)) continue;
      const first = seen.get(name);
      if (first === undefined) seen.set(name, key);
      else found.push({ path: here, line: lineOf(key), firstLine: lineOf(first) });
    }
  }
  return found.sort((a, b) => a.line - b.line);
}
