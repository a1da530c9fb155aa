import { formatWindow } from "../core/duration.js";
import type { LineError, SeenLines } from "./errors-seen.js";
import type { PolicyReplay } from "./runner.js";
import type { TopValues } from "./tally.js";
import {
  distribution,
  MIN_SUBJECT_WINDOWS,
  type PeakDistribution,
  type Suggestion,
  sortedPeaks,
  suggestLimit,
} from "./tuning.js";

export interface RuleReport {
  readonly id: string;
  readonly limit: number;
  readonly window: string;
  readonly algorithm: string;
  readonly action: "block" | "challenge";
  readonly shadow: boolean;
  readonly matched: number;
  /** Requests this rule let through (the request may still have been refused by another rule). */
  readonly allowed: number;
  /** Blocked or challenged by this rule (0 for a shadow rule, which never refuses). */
  readonly refused: number;
  readonly challenged: number;
  readonly blocked: number;
  /** Shadow rule: requests it would have refused. */
  readonly shadowRefused: number;
  readonly subjects: number;
  readonly refusedSubjects: number;
  /** Of the requests it matched, the share it refused (shadow: would have refused). */
  readonly refusedShare: number;
  readonly refusedSubjectShare: number;
  readonly firstRefusal: string | null;
  readonly lastRefusal: string | null;
  readonly peaks: PeakDistribution;
  readonly suggestion: Suggestion;
}

export interface OffenderReport {
  readonly subject: string;
  readonly refused: number;
  readonly challenged: number;
  readonly blocked: number;
  readonly peak: number;
  readonly rules: readonly string[];
  readonly first: string;
  readonly last: string;
  readonly paths: readonly { value: string; count: number }[];
  readonly userAgents: readonly { value: string; count: number }[];
}

export interface PolicyReport {
  readonly policy: string;
  readonly actions: { allow: number; block: number; challenge: number; unavailable: number };
  readonly reasons: Record<string, number>;
  readonly rules: readonly RuleReport[];
  readonly refusedSubjects: number;
  readonly topRefused: readonly OffenderReport[];
  /** Refusals of subjects beyond those described (memory bound). */
  readonly refusalsNotDescribed: number;
  /** Counters the memory store dropped while they were live (its key bound was reached). */
  readonly storeEvictions: number;
}

export interface ReplayReport extends PolicyReport {
  readonly inputs: readonly { readonly name: string; readonly format: string }[];
  readonly requests: number;
  readonly malformed: number;
  readonly errors: readonly LineError[];
  /** Lines replayed though cut off after their required fields, and the first of them. */
  readonly truncated: number;
  readonly truncatedLines: readonly LineError[];
  readonly late: number;
  readonly lateMaxBehindSeconds: number;
  readonly reorderSeconds: number;
  readonly start: string | null;
  readonly end: string | null;
  readonly spanSeconds: number;
  readonly identity: {
    readonly users: boolean;
    readonly requestsWithUser: number;
    readonly note: string;
  };
  readonly refuseAtMost: number;
  /** `--tighten`: suggestions may refuse subjects the current limits admit. */
  readonly tighten: boolean;
  readonly compare?: PolicyReport;
}

function iso(time: number): string | null {
  return Number.isNaN(time) ? null : new Date(time).toISOString();
}

function values(top: TopValues, count: number): { value: string; count: number }[] {
  const list = top.top(count);
  if (top.other > 0) list.push({ value: "(other)", count: top.other });
  return list;
}

export function policyReport(
  replay: PolicyReplay,
  share: number,
  top: number,
  tighten: boolean,
): PolicyReport {
  const tally = replay.tally;
  const rules = tally.rules.map((rule): RuleReport => {
    const refused = rule.challenged + rule.blocked;
    const sorted = sortedPeaks(rule);
    return {
      id: rule.rule.id,
      limit: rule.rule.limit,
      window: formatWindow(rule.rule.window),
      algorithm: rule.rule.algorithm,
      action: rule.rule.action,
      shadow: rule.rule.shadow,
      matched: rule.matched,
      allowed: rule.allowed,
      refused,
      challenged: rule.challenged,
      blocked: rule.blocked,
      shadowRefused: rule.shadowRefused,
      subjects: rule.subjects.size,
      refusedSubjects: rule.refusedSubjects,
      refusedShare: rule.matched === 0 ? 0 : (refused + rule.shadowRefused) / rule.matched,
      refusedSubjectShare: rule.subjects.size === 0 ? 0 : rule.refusedSubjects / rule.subjects.size,
      firstRefusal: iso(rule.firstRefusal),
      lastRefusal: iso(rule.lastRefusal),
      peaks: distribution(sorted),
      suggestion: suggestLimit(rule, sorted, share, tighten),
    };
  });
  const offenders = [...tally.offenders.values()]
    .sort((a, b) => b.refused - a.refused || (a.subject < b.subject ? -1 : 1))
    .slice(0, top)
    .map(
      (offender): OffenderReport => ({
        subject: offender.subject,
        refused: offender.refused,
        challenged: offender.challenged,
        blocked: offender.blocked,
        peak: offender.peak,
        rules: offender.rules,
        first: iso(offender.first) as string,
        last: iso(offender.last) as string,
        paths: values(offender.paths, 5),
        userAgents: values(offender.userAgents, 3),
      }),
    );
  return {
    policy: replay.file,
    actions: { ...tally.actions },
    reasons: Object.fromEntries(tally.reasons),
    rules,
    refusedSubjects: tally.offenders.size,
    topRefused: offenders,
    refusalsNotDescribed: tally.refusalsNotDescribed,
    storeEvictions: replay.store.evictions,
  };
}

export interface ReportInput {
  readonly replays: readonly PolicyReplay[];
  readonly inputs: readonly { name: string; format: string }[];
  readonly seen: SeenLines;
  readonly reorderMs: number;
  readonly withUsers: boolean;
  readonly share: number;
  readonly tighten: boolean;
  readonly top: number;
}

export function buildReport(input: ReportInput): ReplayReport {
  const [primary, other] = input.replays as [PolicyReplay, PolicyReplay | undefined];
  const tally = primary.tally;
  const span = Number.isNaN(tally.first) ? 0 : (tally.last - tally.first) / 1000;
  const report: ReplayReport = {
    ...policyReport(primary, input.share, input.top, input.tighten),
    inputs: input.inputs,
    requests: tally.requests,
    malformed: input.seen.malformed.count,
    errors: input.seen.malformed.samples,
    truncated: input.seen.truncated.count,
    truncatedLines: input.seen.truncated.samples,
    late: input.seen.lateness.late,
    lateMaxBehindSeconds: input.seen.lateness.maxBehindMs / 1000,
    reorderSeconds: input.reorderMs / 1000,
    start: iso(tally.first),
    end: iso(tally.last),
    spanSeconds: span,
    identity: {
      users: input.withUsers,
      requestsWithUser: tally.withUser,
      note: input.withUsers
        ? `users from the log's user field: ${tally.withUser} of ${tally.requests} requests carried one; the rest are anonymous`
        : "the log carries no verified user (no --user-field): all traffic is counted as anonymous, by address",
    },
    refuseAtMost: input.share,
    tighten: input.tighten,
  };
  if (other === undefined) return report;
  return { ...report, compare: policyReport(other, input.share, input.top, input.tighten) };
}

/** A share as people read it: `0.1%`, `<0.01%`, `12.5%`. */
export function percent(share: number): string {
  if (share === 0) return "0%";
  if (share < 0.0001) return "<0.01%";
  return `${(share * 100).toFixed(share < 0.1 ? 2 : 1)}%`;
}

/**
 * The "Suggested policy change" section, the same sentences in the text and HTML reports: the
 * rules whose limit should change, and those whose suggestion was withheld, with why.
 */
export function suggestedChanges(report: ReplayReport): { heading: string; lines: string[] } {
  const admitted = report.tighten ? "" : ", never one the current limit admits";
  const heading = `Suggested policy change (each limit refuses at most ${percent(report.refuseAtMost)} of its subjects${admitted}; from at least ${MIN_SUBJECT_WINDOWS.toLocaleString("en-US")} subject-windows)`;
  const lines: string[] = [];
  for (const rule of report.rules) {
    const { suggestedLimit, refusedSubjects, subjects, withheld } = rule.suggestion;
    if (suggestedLimit !== null) {
      lines.push(
        `${rule.id}: limit ${rule.limit} -> ${suggestedLimit} per ${rule.window} (would refuse ${refusedSubjects.toLocaleString("en-US")} of ${subjects.toLocaleString("en-US")} subjects; now ${rule.refusedSubjects.toLocaleString("en-US")})`,
      );
    } else if (withheld !== null) {
      lines.push(`${rule.id}: no suggestion (${withheld})`);
    }
  }
  if (lines.length === 0) lines.push("none: every limit already fits");
  return { heading, lines };
}

/**
 * A subject as a person reads it: the counter key's encoded part decoded
 * (`ip:2001%3Adb8%3A%3A/64` is shown as `ip:2001:db8::/64`).
 */
export function readableSubject(subject: string): string {
  const colon = subject.indexOf(":");
  try {
    return subject.slice(0, colon + 1) + decodeURIComponent(subject.slice(colon + 1));
  } catch {
    return subject;
  }
}
