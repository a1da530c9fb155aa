import { describe, expect, it } from "vitest";
import { areaOfContinent, farAreas } from "../../src/adapters/cloudflare/areas.js";
import { CloudflareStore } from "../../src/adapters/cloudflare/store.js";

const namespace = { idFromName: () => ({}), get: () => ({ fetch: async () => new Response() }) };

describe("areas: options", () => {
  it("refuses an area that is not a Durable Object location hint", () => {
    const store = (areas: { lease: string; byContinent?: Record<string, string> }) =>
      new CloudflareStore({
        env: { EDGELIMIT_COUNTER: namespace },
        ratelimits: {},
        counter: "EDGELIMIT_COUNTER",
        areas,
      });
    expect(() => store({ lease: "us-east-1" })).toThrow(/not a Durable Object location hint/);
    expect(() => store({ lease: "enam", byContinent: { EU: "europe" } })).toThrow(
      expect.objectContaining({ code: "EL_STORE_OPTION" }),
    );
    expect(() => store({ lease: "enam" })).not.toThrow();
  });

  it("gives each far area an allowance and maps a continent to its area, the lease area else", () => {
    const areas = { lease: "enam", byContinent: { NA: "enam", EU: "weur", AS: "apac" } };
    expect(farAreas(areas)).toEqual(["apac", "weur"]);
    expect(areaOfContinent(areas, "EU")).toBe("weur");
    expect(areaOfContinent(areas, "AF")).toBe("enam");
    expect(areaOfContinent(areas, undefined)).toBe("enam");
    expect(farAreas({ lease: "weur" })).toEqual(["afr", "apac", "enam", "oc", "sam"]);
  });
});
