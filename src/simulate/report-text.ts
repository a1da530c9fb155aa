/** The default report: one aligned table, one column per counting mode. */
import { count, textTable } from "../offline/text.js";
import { figureRows } from "./figures.js";
import type { SimulationReport } from "./report.js";

export function formatText(report: SimulationReport, busyAbove: number): string {
  const header = `edgelimit simulate: ${report.scenario} (seed ${report.seed}), ${report.durationSeconds} s simulated, ${report.store}${report.replicas.length > 1 ? ` (${report.replicas.length} replicas)` : ""} on ${report.deployment}; costs for ${count(report.monthlyRequests)} requests a month\n\n`;
  return `${header}${textTable(figureRows(report, busyAbove))}\n`;
}
