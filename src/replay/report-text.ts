import { count, textTable } from "../offline/text.js";
import type { LineError } from "./errors-seen.js";
import {
  type PolicyReport,
  percent,
  type ReplayReport,
  type RuleReport,
  readableSubject,
  suggestedChanges,
} from "./report.js";

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return textTable([header, ...rows], "  ");
}

function time(iso: string | null): string {
  return iso === null ? "-" : iso.replace(".000Z", "Z");
}

function ruleRows(rules: readonly RuleReport[]): string[][] {
  return rules.map((rule) => [
    rule.shadow ? `${rule.id} (shadow)` : rule.id,
    `${rule.limit}/${rule.window}`,
    count(rule.matched),
    count(rule.allowed),
    count(rule.challenged),
    count(rule.blocked),
    count(rule.shadowRefused),
    percent(rule.refusedShare),
    `${count(rule.refusedSubjects)}/${count(rule.subjects)}`,
    percent(rule.refusedSubjectShare),
    time(rule.firstRefusal),
    time(rule.lastRefusal),
  ]);
}

const RULE_HEADER = [
  "rule",
  "limit",
  "matched",
  "allowed",
  "challenged",
  "blocked",
  "shadow-only",
  "refused",
  "subjects refused",
  "share",
  "first refusal",
  "last refusal",
];

function actions(report: PolicyReport, requests: number): string {
  const { allow, challenge, block, unavailable } = report.actions;
  const share = (value: number) => (requests === 0 ? "" : ` (${percent(value / requests)})`);
  const parts = [
    `allow ${count(allow)}${share(allow)}`,
    `challenge ${count(challenge)}${share(challenge)}`,
    `block ${count(block)}${share(block)}`,
  ];
  if (unavailable > 0) parts.push(`unavailable ${count(unavailable)}${share(unavailable)}`);
  return parts.join(", ");
}

function offenders(report: PolicyReport): string {
  if (report.topRefused.length === 0) return "  none\n";
  const rows = report.topRefused.map((offender) => [
    readableSubject(offender.subject),
    count(offender.refused),
    count(offender.challenged),
    count(offender.blocked),
    count(offender.peak),
    offender.rules.join(","),
    time(offender.first),
    time(offender.last),
  ]);
  let out = `${table(["subject", "refused", "challenged", "blocked", "peak/window", "rules", "first", "last"], rows)}\n`;
  for (const offender of report.topRefused) {
    const paths = offender.paths.map(({ value, count: n }) => `${value} (${n})`).join(", ");
    const agents = offender.userAgents.map(({ value, count: n }) => `${value} (${n})`).join(", ");
    out += `  ${readableSubject(offender.subject)}\n    paths: ${paths}\n    user agents: ${agents}\n`;
  }
  return out;
}

function tuning(report: ReplayReport): string {
  const rows = report.rules
    .filter((rule) => rule.subjects > 0)
    .map((rule) => [
      rule.id,
      rule.window,
      count(rule.peaks.subjects),
      count(rule.peaks.p50),
      count(rule.peaks.p90),
      count(rule.peaks.p99),
      count(rule.peaks.p999),
      count(rule.peaks.max),
      count(rule.limit),
      count(rule.suggestion.fits),
    ]);
  if (rows.length === 0) return "  no rule matched any request\n";
  let out = `${table(["rule", "window", "subjects", "p50", "p90", "p99", "p99.9", "max", "limit", "fits"], rows)}\n`;
  const changes = suggestedChanges(report);
  out += `\n${changes.heading}:\n`;
  for (const line of changes.lines) out += `  ${line}\n`;
  return out;
}

function compare(report: ReplayReport, other: PolicyReport): string {
  const ids = [...new Set([...report.rules.map((r) => r.id), ...other.rules.map((r) => r.id)])];
  const byId = (rules: readonly RuleReport[], id: string) => rules.find((rule) => rule.id === id);
  const rows = ids.map((id) => {
    const a = byId(report.rules, id);
    const b = byId(other.rules, id);
    const cell = (rule: RuleReport | undefined) =>
      rule === undefined
        ? ["-", "-", "-"]
        : [
            `${rule.limit}/${rule.window}`,
            count(rule.refused + rule.shadowRefused),
            count(rule.refusedSubjects),
          ];
    return [id, ...cell(a), ...cell(b)];
  });
  const actionRows = (["allow", "challenge", "block", "unavailable"] as const).map((action) => [
    action,
    count(report.actions[action]),
    count(other.actions[action]),
  ]);
  return [
    `Compare: A = ${report.policy}, B = ${other.policy}, same ${count(report.requests)} requests`,
    table(["action", "A", "B"], actionRows),
    "",
    table(
      ["rule", "A limit", "A refused", "A subjects", "B limit", "B refused", "B subjects"],
      rows,
    ),
    "",
  ].join("\n");
}

function samples(title: string, lines: readonly LineError[], total: number): string {
  if (lines.length === 0) return "";
  let out = `\n${title} (first ${lines.length} of ${count(total)}):\n`;
  for (const line of lines)
    out += `  ${line.source}:${line.line}: ${line.reason}\n    ${line.text}\n`;
  return out;
}

/** The report as a person reads it in a terminal. */
export function formatText(report: ReplayReport): string {
  const inputs = report.inputs.map((input) => `${input.name} (${input.format})`).join(", ");
  let out = `edgelimit replay: ${report.policy} over ${inputs}\n`;
  out += `  ${count(report.requests)} requests from ${time(report.start)} to ${time(report.end)} (${count(Math.round(report.spanSeconds))} s)\n`;
  out += `  ${count(report.malformed)} malformed lines skipped; ${count(report.late)} lines later than the ${report.reorderSeconds} s reorder window`;
  out +=
    report.late > 0
      ? ` (up to ${report.lateMaxBehindSeconds} s behind, replayed at the time reached)\n`
      : "\n";
  if (report.truncated > 0) {
    out += `  ${count(report.truncated)} truncated lines replayed (cut off after their address, time and request)\n`;
  }
  out += `  identity: ${report.identity.note}\n`;
  if (report.storeEvictions > 0) {
    out += `  warning: the memory store evicted ${count(report.storeEvictions)} live counters (too many subjects at once); counts may be low\n`;
  }
  out += `\nActions: ${actions(report, report.requests)}\n`;
  out += `\nRules (refused = challenged + blocked by the rule; shadow-only = a shadow rule would have refused)\n`;
  out += `${table(RULE_HEADER, ruleRows(report.rules))}\n`;
  out += `\nTop refused subjects (${count(report.refusedSubjects)} refused in all)\n${offenders(report)}`;
  out += `\nTuning: each subject's peak requests per window of the rule\n${tuning(report)}`;
  if (report.compare !== undefined) out += `\n${compare(report, report.compare)}`;
  out += samples("Malformed lines", report.errors, report.malformed);
  out += samples("Truncated lines", report.truncatedLines, report.truncated);
  return out;
}
