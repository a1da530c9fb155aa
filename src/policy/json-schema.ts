/**
 * The policy's JSON Schema, generated from the same zod schema `check` and the loaders use, so
 * the two cannot drift: `edgelimit schema` prints it, and the build ships it as
 * `edgelimit/policy.schema.json` for editors (the example policies name it in their
 * `yaml-language-server` comment). What a JSON Schema cannot say (the spelling of durations,
 * address ranges, path prefixes, cross-field rules) is checked by `check` and the loaders only.
 */
import { z } from "zod";
import { limitNumber, policySchema, ruleSpec } from "./schema.js";

export function policyJsonSchema(): Record<string, unknown> {
  const shorthand = {
    ...z.toJSONSchema(limitNumber, { io: "input" }),
    description: "shorthand for { limit: N }",
  };
  delete (shorthand as { $schema?: string }).$schema;
  const generated = z.toJSONSchema(policySchema, {
    io: "input",
    unrepresentable: "any",
    // A rule is an object or, as shorthand, its limit alone (the loader's preprocess step,
    // which a JSON Schema only sees the object side of).
    override: (context) => {
      if ((context.zodSchema as unknown) !== ruleSpec) return;
      const object = { ...context.jsonSchema };
      for (const key of Object.keys(context.jsonSchema)) delete context.jsonSchema[key];
      context.jsonSchema.anyOf = [shorthand, object];
    },
  }) as Record<string, unknown>;
  return {
    ...generated,
    title: "edgelimit policy",
    description:
      "A rate-limit policy for edgelimit: who is counted, how much they may do, and what happens past the limit. Validate fully with `edgelimit check FILE`.",
  };
}
