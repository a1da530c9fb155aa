/**
 * Hybrid counting's region allowances on DynamoDB (`RegionAllowances` in core/types.ts; the
 * store's opt-in `regionAllowance`, with region holders): each region other than the lease
 * region may admit one unit of a counter in a window without asking the lease region, so that a
 * subject's first request there is answered at the region's latency.
 *
 * - The lease item holds the allowances back from its first write under a rule that has them:
 *   `SET <counter>~held = if_not_exists(<counter>~held, :regions)` beside the counter's `ADD`
 *   (fixed-window.ts), and every write reads it back as counted, so the units the lease item
 *   grants stay below the limit less the units held back.
 * - A region's allowance is an item in that region's holder table (`allowance:<window>#<region>`
 *   under the counter's key): a process of the region spends it (`allowance = 1`) on the
 *   condition that the attribute is absent; a process at the limit, anywhere, revokes it (`2`)
 *   on the condition that it is not spent. Both are conditional writes on one item in one
 *   region, so exactly one of them wins, whatever Global Tables replicate and however late.
 * - A revoked allowance is given back to the lease item once: `ADD <counter>~held -1` with a
 *   mark (`<counter>~<region>`) on the condition that the mark is absent. A spent one is marked
 *   too and stays held. The lease item's answer says how many are neither
 *   (`CounterState.heldBack`), so a subject at its limit reclaims only while some are left.
 *
 * Bound: what the lease item granted never exceeds the limit less the units still held back,
 * each of which is an allowance not revoked; each region spends at most its own allowance, and
 * never a revoked one: the limit in all, in every window, whatever the replication lag.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec, RegionAllowances, StoreCallProgress } from "../../core/types.js";
import {
  counterAttribute,
  type HeldBackWrite,
  type ItemKey,
  numberOf,
  type Table,
  windowKeyAt,
} from "./items.js";
import { type DynamoDbClient, DynamoDbError } from "./protocol.js";
import { holderTtl } from "./region-holder.js";

/** A counter has allowances when its limit is at least this many times the units held back. */
const LIMIT_PER_ALLOWANCE = 1;

const SPENT = "1";
const REVOKED = "2";
const NAMES = { "#a": "allowance", "#t": "ttl" };

/** A region's holder table, as this process reaches it. */
export interface HolderTable {
  readonly client: DynamoDbClient;
  readonly name: string;
}

export interface AllowanceOptions {
  /** This store's region. */
  readonly region: string;
  /** The regions with allowances: every region of the table but the lease region. */
  readonly regions: readonly string[];
  /** Each of `regions`' holder table. */
  readonly holders: (region: string) => HolderTable;
  /** The lease items' table. */
  readonly leases: Table;
  readonly ttlGraceSeconds: number;
}

/**
 * What the lease item holds back for `counter`'s allowances from its first write: the number of
 * regions with allowances, or 0 when its limit leaves no room for them (a limit below that
 * number); undefined for a counter that has nothing to do with them (not a hybrid fixed window).
 */
function heldBackFor(counter: CounterSpec, regions: number): number | undefined {
  if (regions === 0 || counter.counting !== "hybrid" || counter.algorithm !== "fixed-window") {
    return undefined;
  }
  return counter.limit >= LIMIT_PER_ALLOWANCE * regions ? regions : 0;
}

/**
 * The lease item's attribute of the units held back for a counter's allowances. It is set by
 * the first write of a rule that has them and read by every write after, under any rule: a
 * reload that changes the limit keeps the window's count, units held back included.
 */
function heldAttribute(counterAttributeName: string): string {
  return `${counterAttributeName}~held`;
}

/**
 * The write of `specs` in a lease table with allowances (fixed-window.ts); undefined when none
 * of them concerns allowances.
 */
function heldBackWrite(regions: number, specs: readonly CounterSpec[]): HeldBackWrite | undefined {
  const units = specs.map((spec) => heldBackFor(spec, regions));
  if (units.every((held) => held === undefined)) return undefined;
  return {
    prepare(i, attribute, names, values, sets) {
      const held = units[i] ?? 0;
      if (held === 0) return;
      // Held back from the first write of a rule that has them, in an attribute of its own,
      // which every later write reads.
      names[`#h${i}`] = heldAttribute(attribute);
      values[`:h${i}`] = { N: String(held) };
      sets.push(`#h${i} = if_not_exists(#h${i}, :h${i})`);
    },
    read(i, attribute, item) {
      const kept = units[i];
      const heldNow = item?.[heldAttribute(attribute)];
      if (kept === undefined || heldNow === undefined) return { held: 0, heldBack: undefined };
      const marked = Object.keys(item ?? {}).filter((name) => isMark(name, attribute)).length;
      return {
        held: numberOf(heldNow),
        heldBack: kept === 0 ? undefined : Math.max(0, kept - marked),
      };
    },
  };
}

/** The lease item's mark of a region's allowance, beside the counter's attribute. */
function markAttribute(counterAttributeName: string, region: string): string {
  return `${counterAttributeName}~${region}`;
}

/** Whether `name` is one of the marks of `counterAttributeName`'s allowances. */
function isMark(name: string, counterAttributeName: string): boolean {
  return (
    name.startsWith(`${counterAttributeName}~`) && name !== heldAttribute(counterAttributeName)
  );
}

/**
 * A region's allowance item, in that region's holder table: the counter's key, then the window
 * and the region. Not the rule's limit (as a holder's key has): a reload that changes the limit
 * leaves one allowance a window, which the lease item held back once.
 */
function allowanceKey(counter: CounterSpec, now: number, region: string): ItemKey {
  return {
    PK: { S: counter.key },
    SK: { S: `allowance:${windowKeyAt(counter.window, now)}#${region}` },
  };
}

/** The store options region allowances read. */
export interface AllowanceSettings {
  readonly region: string;
  readonly regionHolder?: boolean | undefined;
  readonly globalRegions?: readonly string[] | undefined;
  readonly regionEndpoints?: Readonly<Record<string, string>> | undefined;
}

/** What a store that asks for allowances gets: them, the lease table's part, its clients' end. */
export interface AttachedAllowances {
  readonly allowances: RegionAllowances;
  /** The lease table's part in each write (`Table.allowances`). */
  readonly write: (specs: readonly CounterSpec[]) => HeldBackWrite | undefined;
  /** Closes the clients opened to other regions. */
  close(): void;
}

/**
 * Region allowances for a DynamoDB store, handed to it by the store that offers them
 * (`DynamoDbStore`), so that no other store, and no bundle without them, carries this file.
 */
export interface AllowanceSupport {
  attach(store: {
    readonly options: AllowanceSettings;
    readonly leaseRegion: string;
    /** Names the store in option errors. */
    readonly owner: string;
    readonly leases: Table;
    /** The region holders' table, in every region. */
    readonly holderTable: string;
    readonly ttlGraceSeconds: number;
    /** The client of the store's own region. */
    readonly client: DynamoDbClient;
    /** Makes a client of another region (its endpoint when it is not AWS's). */
    readonly connect: (region: string, endpoint: string | undefined) => DynamoDbClient;
  }): AttachedAllowances;
}

export const ALLOWANCE_SUPPORT: AllowanceSupport = {
  attach({ options, leaseRegion, owner, leases, holderTable, ttlGraceSeconds, client, connect }) {
    const regions = (options.globalRegions ?? []).filter((region) => region !== leaseRegion);
    if (options.regionHolder !== true || regions.length === 0) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: regionAllowance needs regionHolder: true and globalRegions with a region other than the lease region (${leaseRegion})`,
      );
    }
    // Other regions' holder tables, opened when a subject at its limit first reclaims there.
    const clients = new Map<string, DynamoDbClient>([[options.region, client]]);
    const allowances = new DynamoDbRegionAllowances({
      region: options.region,
      regions,
      holders: (region) => {
        let found = clients.get(region);
        if (found === undefined) {
          found = connect(region, options.regionEndpoints?.[region]);
          clients.set(region, found);
        }
        return { client: found, name: holderTable };
      },
      leases,
      ttlGraceSeconds,
    });
    return {
      allowances,
      write: (specs) => heldBackWrite(regions.length, specs),
      close() {
        for (const [region, opened] of clients) if (region !== options.region) opened.close();
      },
    };
  },
};

export class DynamoDbRegionAllowances implements RegionAllowances {
  readonly #options: AllowanceOptions;
  readonly #own: boolean;

  constructor(options: AllowanceOptions) {
    this.#options = options;
    this.#own = options.regions.includes(options.region);
  }

  covers(counter: CounterSpec): boolean {
    return (heldBackFor(counter, this.#options.regions.length) ?? 0) > 0;
  }

  async claim(counter: CounterSpec, now: number, progress?: StoreCallProgress): Promise<boolean> {
    if (!this.#own) return false;
    const { region, holders, ttlGraceSeconds } = this.#options;
    const table = holders(region);
    try {
      await table.client.call(
        "UpdateItem",
        {
          TableName: table.name,
          Key: allowanceKey(counter, now, region),
          UpdateExpression: "SET #a = :spent, #t = if_not_exists(#t, :ttl)",
          ConditionExpression: "attribute_not_exists(#a)",
          ExpressionAttributeNames: NAMES,
          ExpressionAttributeValues: {
            ":spent": { N: SPENT },
            ":ttl": holderTtl(counter, now, ttlGraceSeconds),
          },
        },
        { progress },
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async reclaim(counter: CounterSpec, now: number, refund: number): Promise<number> {
    const { regions } = this.#options;
    const found = await Promise.all(regions.map((region) => this.#revoke(counter, now, region)));
    const given = await Promise.all([
      ...regions.map((region, i) => {
        const outcome = found[i];
        return outcome === undefined ? 0 : this.#mark(counter, now, region, outcome);
      }),
      refund > 0 ? this.refund(counter, now, refund) : 0,
    ]);
    return given.slice(0, regions.length).reduce((sum, units) => sum + units, 0);
  }

  /** Revokes `region`'s allowance unless it was spent; undefined when the call failed. */
  async #revoke(
    counter: CounterSpec,
    now: number,
    region: string,
  ): Promise<"revoked" | "spent" | undefined> {
    const table = this.#options.holders(region);
    try {
      await table.client.call("UpdateItem", {
        TableName: table.name,
        Key: allowanceKey(counter, now, region),
        UpdateExpression: "SET #a = :revoked, #t = if_not_exists(#t, :ttl)",
        ConditionExpression: "attribute_not_exists(#a) OR #a = :revoked",
        ExpressionAttributeNames: NAMES,
        ExpressionAttributeValues: {
          ":revoked": { N: REVOKED },
          ":ttl": holderTtl(counter, now, this.#options.ttlGraceSeconds),
        },
      });
      return "revoked";
    } catch (error) {
      if (isConditionFailure(error)) return "spent";
      // Unknown: the allowance stays held back (capacity unused, never admitted twice).
      return undefined;
    }
  }

  /** Marks `region`'s allowance in the lease item; a revoked one's unit is given back once. */
  async #mark(
    counter: CounterSpec,
    now: number,
    region: string,
    outcome: "revoked" | "spent",
  ): Promise<number> {
    const { leases } = this.#options;
    const attribute = counterAttribute(counter);
    const revoked = outcome === "revoked";
    try {
      await leases.client.call("UpdateItem", {
        TableName: leases.name,
        Key: {
          PK: { S: counter.subject },
          SK: { S: windowKeyAt(counter.window, now) + leases.regionSuffix },
        },
        UpdateExpression: revoked ? "ADD #h :minus SET #m = :mark" : "SET #m = :mark",
        // The units were held back (the answer that asked for this showed them): an ADD on a
        // missing attribute would make it -1, and the first write would then hold none back.
        ConditionExpression: "attribute_exists(#h) AND attribute_not_exists(#m)",
        ExpressionAttributeNames: {
          "#h": heldAttribute(attribute),
          "#m": markAttribute(attribute, region),
        },
        ExpressionAttributeValues: {
          ":mark": { N: revoked ? REVOKED : SPENT },
          ...(revoked ? { ":minus": { N: "-1" } } : {}),
        },
      });
      return revoked ? 1 : 0;
    } catch {
      // Marked already by another process, or the call failed: nothing given back here.
      return 0;
    }
  }

  /**
   * Takes the units of a refused reservation out of the lease item's count: counted, admitted
   * nowhere, they would stand between the subject and the allowances given back. (Any units
   * no request was admitted with may leave the count: the grants it decided stay within it.)
   */
  async refund(counter: CounterSpec, now: number, units: number): Promise<number> {
    const { leases } = this.#options;
    await leases.client
      .call("UpdateItem", {
        TableName: leases.name,
        Key: {
          PK: { S: counter.subject },
          SK: { S: windowKeyAt(counter.window, now) + leases.regionSuffix },
        },
        UpdateExpression: "ADD #c :minus",
        ConditionExpression: "attribute_exists(#c)",
        ExpressionAttributeNames: { "#c": counterAttribute(counter) },
        ExpressionAttributeValues: { ":minus": { N: String(-units) } },
      })
      // Not given back: the subject's capacity is that much lower (the safe direction).
      .catch(() => undefined);
    return 0;
  }
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof DynamoDbError && error.type === "ConditionalCheckFailedException";
}
