import { policyJsonSchema } from "../policy/json-schema.js";
import { SCHEMA_USAGE } from "./usage.js";

/** `edgelimit schema`: prints the policy's JSON Schema. */
export async function run(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(SCHEMA_USAGE);
    return 0;
  }
  if (argv.length > 0) {
    process.stderr.write(`edgelimit schema: unexpected argument "${argv[0]}"\n\n${SCHEMA_USAGE}`);
    return 2;
  }
  process.stdout.write(`${JSON.stringify(policyJsonSchema(), null, 2)}\n`);
  return 0;
}
