/**
 * The DynamoDB expression language, as much of it as a counter store writes: update
 * expressions (`SET a = b + :v, c = if_not_exists(c, :w)`, `ADD a :v`, `REMOVE a`), and
 * condition and key-condition expressions (comparisons, `AND`, `OR`, `NOT`, parentheses,
 * `attribute_exists`, `attribute_not_exists`, `begins_with`). Top-level attributes only. An
 * expression is parsed once and cached by its text (`ExpressionCache`): the names and values
 * it refers to are looked up on each call.
 */
import type { AttributeValue } from "../../stores/dynamodb/client.js";

export type Attributes = Record<string, AttributeValue>;

/** What an expression's `#name` and `:value` refer to in one call. */
export interface Bindings {
  readonly names: Readonly<Record<string, string>> | undefined;
  readonly values: Readonly<Record<string, AttributeValue>> | undefined;
}

type Operand =
  | { readonly kind: "path"; readonly name: string }
  | { readonly kind: "value"; readonly name: string }
  | { readonly kind: "if_not_exists"; readonly path: string; readonly fallback: Operand }
  | {
      readonly kind: "arith";
      readonly op: "+" | "-";
      readonly left: Operand;
      readonly right: Operand;
    };

export type Action =
  | { readonly kind: "SET"; readonly path: string; readonly value: Operand }
  | { readonly kind: "ADD"; readonly path: string; readonly value: Operand }
  | { readonly kind: "REMOVE"; readonly path: string };

export type Condition =
  | { readonly kind: "and" | "or"; readonly left: Condition; readonly right: Condition }
  | { readonly kind: "not"; readonly inner: Condition }
  | { readonly kind: "exists" | "not_exists"; readonly path: string }
  | { readonly kind: "begins_with"; readonly left: Operand; readonly right: Operand }
  | {
      readonly kind: "compare";
      readonly op: string;
      readonly left: Operand;
      readonly right: Operand;
    };

const TOKEN = /\s*(<>|<=|>=|[=<>(),+-]|[#:]?[A-Za-z_][A-Za-z0-9_.-]*)/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    if (/^\s*$/.test(text.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const match = TOKEN.exec(text);
    if (match === null) throw new SyntaxError(`unexpected text at ${at} in "${text}"`);
    tokens.push(match[1] as string);
  }
  return tokens;
}

class Parser {
  #at = 0;
  constructor(
    readonly tokens: string[],
    readonly text: string,
  ) {}
  peek(): string | undefined {
    return this.tokens[this.#at];
  }
  take(expected?: string): string {
    const token = this.tokens[this.#at++];
    if (token === undefined || (expected !== undefined && token.toUpperCase() !== expected)) {
      throw new SyntaxError(`expected ${expected ?? "more"} in "${this.text}"`);
    }
    return token;
  }
  done(): boolean {
    return this.#at >= this.tokens.length;
  }
  operand(): Operand {
    let left = this.#atom();
    while (this.peek() === "+" || this.peek() === "-") {
      const op = this.take() as "+" | "-";
      left = { kind: "arith", op, left, right: this.#atom() };
    }
    return left;
  }
  #atom(): Operand {
    const token = this.take();
    if (token === "if_not_exists") {
      this.take("(");
      const path = this.take();
      this.take(",");
      const fallback = this.operand();
      this.take(")");
      return { kind: "if_not_exists", path, fallback };
    }
    if (token.startsWith(":")) return { kind: "value", name: token };
    return { kind: "path", name: token };
  }
  condition(): Condition {
    let left = this.#conjunction();
    while (this.peek()?.toUpperCase() === "OR") {
      this.take();
      left = { kind: "or", left, right: this.#conjunction() };
    }
    return left;
  }
  #conjunction(): Condition {
    let left = this.#unary();
    while (this.peek()?.toUpperCase() === "AND") {
      this.take();
      left = { kind: "and", left, right: this.#unary() };
    }
    return left;
  }
  #unary(): Condition {
    const token = this.peek();
    if (token?.toUpperCase() === "NOT") {
      this.take();
      return { kind: "not", inner: this.#unary() };
    }
    if (token === "(") {
      this.take();
      const inner = this.condition();
      this.take(")");
      return inner;
    }
    if (token === "attribute_exists" || token === "attribute_not_exists") {
      this.take();
      this.take("(");
      const path = this.take();
      this.take(")");
      return { kind: token === "attribute_exists" ? "exists" : "not_exists", path };
    }
    if (token === "begins_with") {
      this.take();
      this.take("(");
      const left = this.operand();
      this.take(",");
      const right = this.operand();
      this.take(")");
      return { kind: "begins_with", left, right };
    }
    const left = this.operand();
    const op = this.take();
    if (!["=", "<>", "<", "<=", ">", ">="].includes(op)) {
      throw new SyntaxError(`unsupported operator ${op} in "${this.text}"`);
    }
    return { kind: "compare", op, left, right: this.operand() };
  }
}

export function parseUpdate(text: string): Action[] {
  const parser = new Parser(tokenize(text), text);
  const actions: Action[] = [];
  let clause = "";
  while (!parser.done()) {
    const word = parser.peek()?.toUpperCase();
    if (word === "SET" || word === "ADD" || word === "REMOVE" || word === "DELETE") {
      clause = parser.take();
      clause = clause.toUpperCase();
      if (clause === "DELETE") throw new SyntaxError(`DELETE (sets) is not modeled: "${text}"`);
    } else if (word === ",") parser.take();
    const path = parser.take();
    if (clause === "SET") {
      parser.take("=");
      actions.push({ kind: "SET", path, value: parser.operand() });
    } else if (clause === "ADD") actions.push({ kind: "ADD", path, value: parser.operand() });
    else if (clause === "REMOVE") actions.push({ kind: "REMOVE", path });
    else throw new SyntaxError(`expected SET, ADD or REMOVE in "${text}"`);
  }
  return actions;
}

export function parseCondition(text: string): Condition {
  const parser = new Parser(tokenize(text), text);
  const condition = parser.condition();
  if (!parser.done()) throw new SyntaxError(`unexpected ${parser.peek()} in "${text}"`);
  return condition;
}

/** Parsed expressions by their text; bounded by the few texts a store writes. */
export class ExpressionCache {
  readonly #updates = new Map<string, Action[]>();
  readonly #conditions = new Map<string, Condition>();

  update(text: string): Action[] {
    let parsed = this.#updates.get(text);
    if (parsed === undefined) {
      parsed = parseUpdate(text);
      if (this.#updates.size < 10_000) this.#updates.set(text, parsed);
    }
    return parsed;
  }

  condition(text: string): Condition {
    let parsed = this.#conditions.get(text);
    if (parsed === undefined) {
      parsed = parseCondition(text);
      if (this.#conditions.size < 10_000) this.#conditions.set(text, parsed);
    }
    return parsed;
  }
}

export function attributeName(path: string, bindings: Bindings): string {
  if (!path.startsWith("#")) return path;
  const name = bindings.names?.[path];
  if (name === undefined) throw new SyntaxError(`ExpressionAttributeNames has no ${path}`);
  return name;
}

export function evaluate(
  operand: Operand,
  item: Attributes | undefined,
  bindings: Bindings,
): AttributeValue | undefined {
  switch (operand.kind) {
    case "path":
      return item?.[attributeName(operand.name, bindings)];
    case "value": {
      const value = bindings.values?.[operand.name];
      if (value === undefined)
        throw new SyntaxError(`ExpressionAttributeValues has no ${operand.name}`);
      return value;
    }
    case "if_not_exists":
      return (
        item?.[attributeName(operand.path, bindings)] ?? evaluate(operand.fallback, item, bindings)
      );
    case "arith": {
      const left = numeric(evaluate(operand.left, item, bindings));
      const right = numeric(evaluate(operand.right, item, bindings));
      return { N: String(operand.op === "+" ? left + right : left - right) };
    }
  }
}

function numeric(value: AttributeValue | undefined): number {
  if (value === undefined || !("N" in value)) {
    throw new TypeError(
      "ValidationException: an operand in the update expression has an incorrect data type",
    );
  }
  return Number(value.N);
}

export function holds(
  condition: Condition,
  item: Attributes | undefined,
  bindings: Bindings,
): boolean {
  switch (condition.kind) {
    case "and":
      return holds(condition.left, item, bindings) && holds(condition.right, item, bindings);
    case "or":
      return holds(condition.left, item, bindings) || holds(condition.right, item, bindings);
    case "not":
      return !holds(condition.inner, item, bindings);
    case "exists":
      return item?.[attributeName(condition.path, bindings)] !== undefined;
    case "not_exists":
      return item?.[attributeName(condition.path, bindings)] === undefined;
    case "begins_with": {
      const left = evaluate(condition.left, item, bindings);
      const right = evaluate(condition.right, item, bindings);
      return (
        left !== undefined &&
        right !== undefined &&
        "S" in left &&
        "S" in right &&
        left.S.startsWith(right.S)
      );
    }
    case "compare": {
      const left = evaluate(condition.left, item, bindings);
      const right = evaluate(condition.right, item, bindings);
      if (left === undefined || right === undefined) return false;
      const order =
        "N" in left && "N" in right ? Number(left.N) - Number(right.N) : compareText(left, right);
      switch (condition.op) {
        case "=":
          return order === 0;
        case "<>":
          return order !== 0;
        case "<":
          return order < 0;
        case "<=":
          return order <= 0;
        case ">":
          return order > 0;
        default:
          return order >= 0;
      }
    }
  }
}

function compareText(left: AttributeValue, right: AttributeValue): number {
  const a = "S" in left ? left.S : left.N;
  const b = "S" in right ? right.S : right.N;
  return a < b ? -1 : a > b ? 1 : 0;
}
