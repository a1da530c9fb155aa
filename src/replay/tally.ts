import type { Decision } from "../core/decision.js";
import type { ResolvedRule } from "../core/model.js";
import type { LogRecord } from "./record.js";
import { TimeSeries } from "./series.js";

/** Most distinct paths or user agents kept per refused subject; the rest count as "other". */
const VALUES_PER_SUBJECT = 16;
/** Most refused subjects described in detail; beyond, they are only counted. */
const MAX_OFFENDERS = 100_000;

/** A bounded count of distinct values (paths, user agents) for one subject. */
export class TopValues {
  readonly counts = new Map<string, number>();
  other = 0;

  add(value: string): void {
    const count = this.counts.get(value);
    if (count !== undefined) this.counts.set(value, count + 1);
    else if (this.counts.size < VALUES_PER_SUBJECT) this.counts.set(value, 1);
    else this.other++;
  }

  top(count: number): { value: string; count: number }[] {
    return [...this.counts]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, count)
      .map(([value, n]) => ({ value, count: n }));
  }
}

/** One subject under one rule: its demand per window (for tuning) and its refusals. */
export interface SubjectCounts {
  window: number;
  count: number;
  /** Most requests it made in one window of the rule's length (fixed, epoch-aligned). */
  peak: number;
  /** Requests the rule refused, or would have (a shadow rule). */
  refused: number;
}

export class RuleTally {
  readonly rule: ResolvedRule;
  readonly index: number;
  matched = 0;
  allowed = 0;
  challenged = 0;
  blocked = 0;
  /** Shadow rules: requests they would have refused. */
  shadowRefused = 0;
  refusedSubjects = 0;
  /** A subject's requests in one window, counted once per subject and window: the evidence. */
  subjectWindows = 0;
  firstRefusal = Number.NaN;
  lastRefusal = Number.NaN;
  /** By counter key (`ip:203.0.113.7|namespace|scope`): one entry per subject the rule counted. */
  readonly subjects = new Map<string, SubjectCounts>();
  readonly #windowMs: number | undefined;
  readonly #months: number;

  constructor(rule: ResolvedRule, index: number) {
    this.rule = rule;
    this.index = index;
    this.#windowMs = "ms" in rule.window ? rule.window.ms : undefined;
    this.#months = "months" in rule.window ? rule.window.months : 1;
  }

  windowIndex(time: number): number {
    if (this.#windowMs !== undefined) return Math.floor(time / this.#windowMs);
    const date = new Date(time);
    return Math.floor(((date.getUTCFullYear() - 1970) * 12 + date.getUTCMonth()) / this.#months);
  }
}

export interface Offender {
  readonly subject: string;
  refused: number;
  challenged: number;
  blocked: number;
  /** Highest per-window count among the rules that refused it. */
  peak: number;
  first: number;
  last: number;
  readonly rules: string[];
  readonly paths: TopValues;
  readonly userAgents: TopValues;
}

/** Everything a replay of one policy counts, fed one verdict at a time. */
export class Tally {
  requests = 0;
  first = Number.NaN;
  last = Number.NaN;
  withUser = 0;
  readonly actions: Record<Decision["action"], number> = {
    allow: 0,
    block: 0,
    challenge: 0,
    unavailable: 0,
  };
  readonly reasons = new Map<string, number>();
  readonly rules: RuleTally[];
  readonly #byId = new Map<string, RuleTally>();
  /**
   * The rule tally of each outcome position last time: a request's matched rules are mostly
   * those of the one before, and their ids the same strings, so a comparison spares a lookup
   * (bench/replay.bench.ts).
   */
  readonly #lastByPosition: (RuleTally | undefined)[] = [];
  readonly offenders = new Map<string, Offender>();
  /** Refusals of subjects beyond the MAX_OFFENDERS described: in the totals, not in the table. */
  refusalsNotDescribed = 0;
  readonly series: TimeSeries;

  constructor(rules: readonly ResolvedRule[]) {
    this.rules = rules.map((rule, index) => new RuleTally(rule, index));
    for (const tally of this.rules) this.#byId.set(tally.rule.id, tally);
    this.series = new TimeSeries(rules.length);
  }

  add(record: LogRecord, verdict: Decision): void {
    const time = record.time;
    this.requests++;
    if (this.requests === 1) this.first = time;
    this.last = time;
    if (record.user !== undefined) this.withUser++;
    this.actions[verdict.action]++;
    const reason = verdict.reason;
    this.reasons.set(reason, (this.reasons.get(reason) ?? 0) + 1);

    const series = this.series;
    const bucket = series.bucketOf(time);
    const refusedRequest = verdict.action !== "allow";
    if (refusedRequest) (series.refused[bucket] as number)++;
    else (series.allowed[bucket] as number)++;

    let offender: Offender | undefined;
    const outcomes = verdict.outcomes;
    for (let i = 0; i < outcomes.length; i++) {
      const outcome = outcomes[i] as Decision["outcomes"][number];
      let tally = this.#lastByPosition[i];
      if (tally === undefined || tally.rule.id !== outcome.ruleId) {
        tally = this.#byId.get(outcome.ruleId);
        if (tally === undefined) continue;
        this.#lastByPosition[i] = tally;
      }
      tally.matched++;
      const window = tally.windowIndex(time);
      let subject = tally.subjects.get(outcome.key);
      if (subject === undefined) {
        subject = { window, count: 0, peak: 0, refused: 0 };
        tally.subjects.set(outcome.key, subject);
        tally.subjectWindows++;
      } else if (subject.window !== window) {
        subject.window = window;
        subject.count = 0;
        tally.subjectWindows++;
      }
      if (++subject.count > subject.peak) subject.peak = subject.count;

      const state = outcome.state;
      // A shadow rule never refuses: it lets every request through and says which it would not have.
      if (state.allowed || outcome.shadow) tally.allowed++;
      if (state.allowed) continue;
      const byRule = series.byRule[tally.index] as number[];
      byRule[bucket] = (byRule[bucket] as number) + 1;
      if (outcome.shadow) {
        tally.shadowRefused++;
        subject.refused++;
        continue;
      }
      const rule = tally.rule;
      const challenged =
        rule.action === "challenge" && state.count < rule.limit * rule.challengeBand;
      if (challenged) tally.challenged++;
      else tally.blocked++;
      if (subject.refused++ === 0) tally.refusedSubjects++;
      if (Number.isNaN(tally.firstRefusal)) tally.firstRefusal = time;
      tally.lastRefusal = time;

      offender ??= this.#offender(verdict.subject, time);
      if (offender !== undefined) {
        if (subject.peak > offender.peak) offender.peak = subject.peak;
        if (!offender.rules.includes(rule.id)) offender.rules.push(rule.id);
      }
    }
    if (offender !== undefined && refusedRequest) {
      offender.refused++;
      if (verdict.action === "challenge") offender.challenged++;
      else offender.blocked++;
      offender.last = time;
      offender.paths.add(verdict.path);
      offender.userAgents.add(record.userAgent ?? "-");
    }
  }

  #offender(subject: string, time: number): Offender | undefined {
    let offender = this.offenders.get(subject);
    if (offender !== undefined) return offender;
    if (this.offenders.size >= MAX_OFFENDERS) {
      this.refusalsNotDescribed++;
      return undefined;
    }
    offender = {
      subject,
      refused: 0,
      challenged: 0,
      blocked: 0,
      peak: 0,
      first: time,
      last: time,
      rules: [],
      paths: new TopValues(),
      userAgents: new TopValues(),
    };
    this.offenders.set(subject, offender);
    return offender;
  }
}
