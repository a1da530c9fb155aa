/**
 * Hybrid counting by area on Workers (the opt-in `areas`; docs/cloudflare.md, "Areas"). A
 * rule's Durable Object lives in one place, the lease area; without areas, an isolate far from
 * it pays that round trip on every exact request and on every hybrid request its own units do
 * not cover. With areas, each hybrid subject has one more object in each area (its area object,
 * created with the area's location hint), which spends the rule objects' units near the
 * isolates of its area, as one gateway process of a region would (core/hybrid-counting.ts, with
 * an area holder and allowances: area-object.ts), and is filled from the rule objects behind
 * its answers. The rule objects hold back one unit a window for each far area's allowance, so a
 * subject's first request in a far area is answered there.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec } from "../../core/types.js";

export interface AreaOptions {
  /**
   * The location hint of the area where the rule objects live (the lease area): they are created
   * with it. Cloudflare's hints: wnam, enam, sam, weur, eeur, apac, oc, afr, me.
   */
  readonly lease: string;
  /**
   * The area of an isolate, by its requests' `cf.continent`; a continent not named here is
   * served from the lease area. Default: each continent's nearest hint (NA enam, SA sam, EU weur,
   * AF afr, AS apac, OC oc).
   */
  readonly byContinent?: Readonly<Record<string, string>>;
}

/** Cloudflare's Durable Object location hints. */
export const LOCATION_HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"];

/** Each continent's nearest location hint. */
export const DEFAULT_CONTINENT_AREAS: Readonly<Record<string, string>> = {
  NA: "enam",
  SA: "sam",
  EU: "weur",
  AF: "afr",
  AS: "apac",
  OC: "oc",
};

/** What an area object is told of the areas with each call (area-object.ts). */
export interface AreaPlan {
  /** The area this object serves. */
  readonly area: string;
  readonly lease: string;
  /** Every area but the lease area, sorted: each has an allowance. */
  readonly far: readonly string[];
  /** The Durable Object namespace binding of the rule and area objects. */
  readonly binding: string;
}

/** The far areas of `options`, checked: each a location hint. */
export function farAreas(options: AreaOptions): string[] {
  const byContinent = options.byContinent ?? DEFAULT_CONTINENT_AREAS;
  for (const hint of [options.lease, ...Object.values(byContinent)]) {
    if (!LOCATION_HINTS.includes(hint)) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `cloudflare: areas: "${hint}" is not a Durable Object location hint (${LOCATION_HINTS.join(", ")})`,
      );
    }
  }
  return [...new Set(Object.values(byContinent))].filter((hint) => hint !== options.lease).sort();
}

/** The area of a request, from its `cf.continent` (the lease area when unmapped). */
export function areaOfContinent(options: AreaOptions, continent: unknown): string {
  const byContinent = options.byContinent ?? DEFAULT_CONTINENT_AREAS;
  return (typeof continent === "string" ? byContinent[continent] : undefined) ?? options.lease;
}

/**
 * The name of `subject`'s object in `area`. Braces, as the `{overrides}` object's: no counter key
 * starts with one (a key starts with its subject's kind).
 */
export function areaObjectName(area: string, subject: string): string {
  return `{area:${area}}${subject}`;
}

/** A counter has allowances when its limit is at least this many times the units held back. */
const LIMIT_PER_ALLOWANCE = 1;

/**
 * Units a rule object holds back for `counter`'s allowances from its first write in a window:
 * the number of far areas, or 0 when its limit leaves no room for them; undefined for a counter
 * that has nothing to do with them (not a hybrid fixed window).
 */
export function heldFor(counter: CounterSpec, far: number): number | undefined {
  if (far === 0 || counter.counting !== "hybrid" || counter.algorithm !== "fixed-window") {
    return undefined;
  }
  return counter.limit >= LIMIT_PER_ALLOWANCE * far ? far : 0;
}
