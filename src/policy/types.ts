/** The policy model lives in the core, which runs on it; `policy/` only produces it. */
export * from "../core/model.js";
