import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { EdgelimitError } from "../../src/core/errors.js";
import { policyJsonSchema } from "../../src/policy/json-schema.js";
import { parsePolicy } from "../../src/policy/load.js";

const EXAMPLES = ["examples/policies/cloudfront.yaml", "examples/policies/workers.yaml"];

/** Policies both must refuse: errors of structure, which a JSON Schema can say. */
const BAD: Record<string, string> = {
  "an unknown top-level field": "version: 1\nlimits: { global: 10 }\n",
  "an unknown rule option":
    "version: 1\ntiers: { anonymous: { global: { limit: 10, burst: 5 } } }\n",
  "an algorithm that does not exist": "version: 1\ndefaults: { algorithm: leaky-bucket }\n",
  "a fail mode that does not exist": "version: 1\ndefaults: { failMode: maybe }\n",
  "a limit that is not a number": 'version: 1\ntiers: { anonymous: { global: "ten" } }\n',
  "a negative cost": "version: 1\ndefaults: { cost: -1 }\n",
  "another format version": "version: 2\n",
  "an ip source that does not exist": "version: 1\nidentity: { ip: { source: cookie } }\n",
};

function validator() {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  return ajv.compile(policyJsonSchema());
}

function checkAccepts(text: string): boolean {
  try {
    parsePolicy(text);
    return true;
  } catch (error) {
    if (error instanceof EdgelimitError) return false;
    throw error;
  }
}

describe("the policy's JSON Schema", () => {
  it("accepts the example policies, as check does", () => {
    const validate = validator();
    for (const file of EXAMPLES) {
      const text = readFileSync(file, "utf8");
      expect(text.startsWith("# yaml-language-server: $schema=")).toBe(true);
      expect(validate(parse(text)), `${file}: ${JSON.stringify(validate.errors)}`).toBe(true);
      expect(checkAccepts(text)).toBe(true);
    }
  });

  for (const [what, text] of Object.entries(BAD)) {
    it(`refuses ${what}, as check does`, () => {
      expect(validator()(parse(text))).toBe(false);
      expect(checkAccepts(text)).toBe(false);
    });
  }

  it("lets a policy name its schema with a $schema key", () => {
    const text = JSON.stringify({
      $schema: "./node_modules/edgelimit/dist/policy.schema.json",
      version: 1,
      tiers: { anonymous: { global: 10 } },
    });
    expect(validator()(JSON.parse(text))).toBe(true);
    expect(checkAccepts(text)).toBe(true);
  });

  it("is what edgelimit schema prints and the build ships", () => {
    const printed = spawnSync(process.execPath, ["dist/cli/main.js", "schema"], {
      encoding: "utf8",
    });
    expect(printed.status).toBe(0);
    expect(JSON.parse(printed.stdout)).toEqual(policyJsonSchema());
    expect(JSON.parse(readFileSync("dist/policy.schema.json", "utf8"))).toEqual(policyJsonSchema());
  });
});
