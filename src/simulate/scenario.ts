/**
 * The scenario file: regions and their round trips, the store, the deployment, the traffic,
 * the counting modes to compare and the prices. Validated with zod; every error names the
 * field (`store.rttMs.eu-west-1.us-east-1`) and says what is expected.
 */
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { SCENARIO_SCHEMA, type Scenario } from "./scenario-schema.js";
import { sizeProblems } from "./size.js";

export type { Scenario } from "./scenario-schema.js";

export class ScenarioError extends Error {
  /** `EL_SCENARIO_TOO_LARGE`: valid, but beyond what simulate runs (size.ts). */
  readonly code: "EL_SCENARIO_INVALID" | "EL_SCENARIO_TOO_LARGE";

  constructor(
    message: string,
    code: "EL_SCENARIO_INVALID" | "EL_SCENARIO_TOO_LARGE" = "EL_SCENARIO_INVALID",
  ) {
    super(message);
    this.code = code;
  }
}

/** Checks a parsed scenario; `source` names it in errors, `baseDir` resolves its policy. */
export function parseScenario(input: unknown, baseDir: string, source = "scenario"): Scenario {
  const result = SCENARIO_SCHEMA.safeParse(input);
  if (!result.success) {
    const lines = result.error.issues.map(
      (issue) =>
        `${issue.path.length === 0 ? "(top level)" : issue.path.join(".")}: ${issue.message}`,
    );
    throw new ScenarioError(`${source} is not a valid scenario:\n  ${lines.join("\n  ")}`);
  }
  const scenario = result.data;
  const problems = crossCheck(scenario);
  if (problems.length > 0) {
    throw new ScenarioError(`${source} is not a valid scenario:\n  ${problems.join("\n  ")}`);
  }
  const parsed = { ...scenario, policyPath: resolve(baseDir, scenario.policy) };
  const tooLarge = sizeProblems(parsed);
  if (tooLarge.length > 0) {
    throw new ScenarioError(
      `${source} is too large to simulate (docs/accuracy.md, "Limits of the model"):\n  ${tooLarge.join("\n  ")}`,
      "EL_SCENARIO_TOO_LARGE",
    );
  }
  return parsed;
}

/**
 * Reads and checks a scenario file. `modes` (the CLI's `--modes`) replaces the file's modes
 * before the checks, so that a mode the file does not list is checked as if it did.
 */
export function loadScenario(file: string, modes?: readonly string[]): Scenario {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ScenarioError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let input: unknown;
  try {
    input = parseYaml(text);
  } catch (error) {
    throw new ScenarioError(`${file} is not YAML: ${(error as Error).message}`);
  }
  if (modes !== undefined && typeof input === "object" && input !== null) {
    input = { ...input, modes };
  }
  return parseScenario(input, dirname(resolve(file)), file);
}

/** What one field cannot say: names that must refer to each other. */
function crossCheck(scenario: Omit<Scenario, "policyPath">): string[] {
  const problems: string[] = [];
  const regions = Object.keys(scenario.regions);
  if (regions.length === 0) problems.push("regions: name at least one region");
  const known = (name: string, field: string) => {
    if (!regions.includes(name))
      problems.push(`${field}: unknown region "${name}" (regions: ${regions.join(", ")})`);
  };
  const { store } = scenario;
  if (store.kind === "dynamodb") {
    for (const region of regions) {
      for (const replica of store.replicas) {
        if (store.rttMs[region]?.[replica] === undefined) {
          problems.push(
            `store.rttMs.${region}.${replica}: give the round trip from ${region} to replica ${replica}, in ms`,
          );
        }
      }
    }
    const lease = store.lease;
    if (lease !== undefined) {
      if (lease.table === store.table)
        problems.push("store.lease.table: name a table other than store.table");
      if (lease.holders === store.table || lease.holders === lease.table)
        problems.push("store.lease.holders: name a table other than store.table and lease.table");
      for (const region of regions) {
        if (store.rttMs[region]?.[lease.region] === undefined) {
          problems.push(
            `store.rttMs.${region}.${lease.region}: give the round trip from ${region} to the lease region ${lease.region}, in ms`,
          );
        }
      }
    }
    store.incidents.forEach((found, i) => {
      if (!store.replicas.includes(found.replica))
        problems.push(
          `store.incidents.${i}.replica: "${found.replica}" is not one of store.replicas`,
        );
      if (found.to <= found.from) problems.push(`store.incidents.${i}.to: must be after from`);
    });
  } else if (store.kind === "redis") {
    for (const region of regions) {
      if (store.rttMs[region] === undefined)
        problems.push(
          `store.rttMs.${region}: give the round trip from ${region} to the Redis primary, in ms`,
        );
    }
  }
  if (store.kind !== "dynamodb" && scenario.modes.includes("two-writes")) {
    problems.push(
      `modes: "two-writes" is a DynamoDB design (docs/accuracy.md); it needs store.kind: dynamodb`,
    );
  }
  for (const mode of ["hybrid+holder", "hybrid+allowance"] as const) {
    if (store.kind !== "dynamodb" && scenario.modes.includes(mode)) {
      problems.push(
        `modes: "${mode}" holds reservations in DynamoDB items per region; it needs store.kind: dynamodb`,
      );
    }
  }
  if (
    scenario.modes.includes("hybrid+allowance") &&
    store.kind === "dynamodb" &&
    store.replicas.length < 2
  ) {
    problems.push(
      `modes: "hybrid+allowance" gives each region but the lease region an allowance; it needs store.replicas with two regions or more`,
    );
  }
  scenario.traffic.legitimate.forEach((group, i) => {
    for (const region of Object.keys(group.regions ?? {}))
      known(region, `traffic.legitimate.${i}.regions`);
    for (const path of Object.keys(group.paths)) {
      if (!path.startsWith("/"))
        problems.push(`traffic.legitimate.${i}.paths: "${path}" must start with /`);
    }
  });
  scenario.traffic.attackers.forEach((found, i) => {
    for (const region of found.regions) known(region, `traffic.attackers.${i}.regions`);
  });
  return problems;
}
