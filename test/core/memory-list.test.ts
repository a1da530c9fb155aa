import { describe, expect, it } from "vitest";
import { EntryList, type Linked } from "../../src/stores/memory-list.js";

interface Item extends Linked<Item> {
  readonly name: string;
}

const item = (name: string): Item => ({ name, older: undefined, newer: undefined });

function names(list: EntryList<Item>): string[] {
  const out: string[] = [];
  for (let entry = list.oldest; entry !== undefined; entry = entry.newer) out.push(entry.name);
  return out;
}

describe("memory store entry list", () => {
  it("keeps entries oldest first through removals at either end and in the middle", () => {
    const list = new EntryList<Item>();
    const [a, b, c, d] = ["a", "b", "c", "d"].map(item) as [Item, Item, Item, Item];
    for (const entry of [a, b, c, d]) list.append(entry);
    expect(names(list)).toEqual(["a", "b", "c", "d"]);
    list.remove(a);
    list.remove(c);
    expect(names(list)).toEqual(["b", "d"]);
    list.remove(d);
    expect(list.oldest).toBe(b);
    list.remove(b);
    expect(list.oldest).toBeUndefined();
    expect(list.size).toBe(0);
    list.append(c);
    expect(names(list)).toEqual(["c"]);
  });

  it("agrees with a plain array over random operations", () => {
    const list = new EntryList<Item>();
    const items = new Map<string, Item>();
    const model: string[] = [];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let step = 0; step < 20_000; step++) {
      const name = `k${Math.floor(random() * 300)}`;
      const roll = random();
      const present = model.includes(name);
      if (roll < 0.45 && !present) {
        const entry = items.get(name) ?? item(name);
        items.set(name, entry);
        list.append(entry);
        model.push(name);
      } else if (roll < 0.8 && present) {
        list.remove(items.get(name) as Item);
        model.splice(model.indexOf(name), 1);
      } else if (present) {
        // Re-append: the entry becomes the newest.
        const entry = items.get(name) as Item;
        list.remove(entry);
        list.append(entry);
        model.splice(model.indexOf(name), 1);
        model.push(name);
      }
      expect(list.size).toBe(model.length);
      expect(list.oldest?.name).toBe(model[0]);
    }
    expect(names(list)).toEqual(model);
  });
});
