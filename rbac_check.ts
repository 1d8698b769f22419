/**
 * The operator's RBAC, asked of the API server at start and, while a feature is off, again every
 * recheck interval (kube/access_review.ts: one rules review, access reviews for what it does not
 * cover). A required row (rbac.ts) that is denied stops the operator at start; an optional one
 * turns its feature off with one Warning naming the rule to add, sets
 * `cocoon_operator_rbac_feature_enabled{feature}` to 0, and turns the feature on once a later
 * check finds the rule granted, without a restart. A re-check is one rules review (plus access
 * reviews only where its listing is incomplete). Once every feature is on nothing is asked
 * again: a complete role costs one rules review at start.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { type AccessReport, reviewAccess } from "./kube/access_review.ts";
import type { Client } from "./kube/client.ts";
import { type Clock, realClock, sleep } from "./kube/clock.ts";
import { errorMessage } from "./kube/errors.ts";
import type { Runnable } from "./kube/runnable.ts";
import { rbacFeatureEnabled } from "./metrics/metrics.ts";
import {
  describeNeeds,
  needsOf,
  RBAC_FEATURES,
  type RbacFeature,
  type RbacNeed,
  type RbacPermission,
  ruleYaml,
} from "./rbac.ts";

const log = getLogger(["cocoon-operator", "rbac"]);

/** Options of checkRbac. */
export interface RbacCheckOptions {
  client: Pick<Client, "create">;
  /** The rows this configuration needs (rbac.ts permissionsFor). */
  permissions: readonly RbacPermission[];
  /** The operator's namespace: where namespaced rows apply and the rules review is asked. */
  namespace: string;
  /** Pause between checks while a feature is off (ms); 0: check at start only. */
  recheckMs: number;
  clock?: Clock;
  signal?: AbortSignal;
}

/**
 * Checks every row once. Denied required rows are in `missingRequired` (the caller stops);
 * everything else is logged here.
 */
export async function checkRbac(opts: RbacCheckOptions): Promise<RbacAccess> {
  const needs = needsOf(opts.permissions, opts.namespace);
  const report = await reviewAccess(opts.client, needs.map((n) => n.need), opts.namespace, {
    signal: opts.signal,
  });
  const access = new RbacAccess(opts, needs, report);
  access.logStart(report);
  return access;
}

/** Which features are on, told to whoever waits for one, and re-checked while one is off. */
export class RbacAccess {
  /** Required rows the API server denied: the operator must not start. */
  readonly missingRequired: RbacNeed[];
  /** Required rows nobody could answer for: assumed granted, with a Warning. */
  readonly uncheckedRequired: RbacNeed[];
  readonly #opts: RbacCheckOptions;
  readonly #clock: Clock;
  /** Optional needs not (yet) granted, by feature; a feature with none here is on. */
  readonly #missing = new Map<RbacFeature, RbacNeed[]>();
  /** Why a feature's needs went unanswered, when they did. */
  readonly #unanswered = new Map<RbacFeature, string>();
  readonly #waiting = new Map<RbacFeature, (() => void)[]>();

  constructor(opts: RbacCheckOptions, needs: readonly RbacNeed[], report: AccessReport) {
    this.#opts = opts;
    this.#clock = opts.clock ?? realClock;
    const answers = new Map(report.answers.map((a) => [a.need, a]));
    this.missingRequired = [];
    this.uncheckedRequired = [];
    for (const need of needs) {
      const { feature } = need.permission;
      if (feature && !this.#missing.has(feature)) this.#missing.set(feature, []);
      const answer = answers.get(need.need);
      if (answer?.allowed === true) continue;
      if (!feature) {
        (answer?.allowed === false ? this.missingRequired : this.uncheckedRequired).push(need);
        continue;
      }
      this.#missing.get(feature)!.push(need);
      if (answer?.allowed === undefined) {
        this.#unanswered.set(feature, answer?.reason ?? report.rulesError ?? "no answer");
      }
    }
    for (const feature of this.features()) {
      rbacFeatureEnabled.set({ feature }, this.enabled(feature) ? 1 : 0);
    }
  }

  /** The optional features this configuration uses, on or off. */
  features(): RbacFeature[] {
    return [...this.#missing.keys()];
  }

  /**
   * Whether feature may run: its rows are granted, or this configuration does not use it (a
   * feature nobody asked about is not held back).
   */
  enabled(feature: RbacFeature): boolean {
    return (this.#missing.get(feature)?.length ?? 0) === 0;
  }

  /** The needs that keep feature off. */
  missingFor(feature: RbacFeature): RbacNeed[] {
    return [...(this.#missing.get(feature) ?? [])];
  }

  /** Runs fn once, when feature turns on after being off; never when it is on already. */
  onEnabled(feature: RbacFeature, fn: () => void): void {
    if (this.enabled(feature)) return;
    this.#waiting.set(feature, [...(this.#waiting.get(feature) ?? []), fn]);
  }

  /** The re-check loop as a manager runnable (every replica, leader or not). */
  runnable(): Runnable {
    return { needLeaderElection: false, start: (signal) => this.recheck(signal) };
  }

  /**
   * Asks again about the needs of the features that are off, every recheck interval, until all
   * are on or signal aborts. Resolves at once when nothing is off or rechecks are disabled.
   */
  async recheck(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && this.#off().length > 0 && this.#opts.recheckMs > 0) {
      await sleep(this.#clock, this.#opts.recheckMs, signal);
      if (signal.aborted) return;
      await this.recheckOnce(signal);
    }
  }

  /** One re-check of the features that are off; turns on those now granted. */
  async recheckOnce(signal?: AbortSignal): Promise<void> {
    const off = this.#off();
    const needs = off.flatMap((f) => this.#missing.get(f) ?? []);
    if (needs.length === 0) return;
    let report: AccessReport;
    try {
      report = await reviewAccess(
        this.#opts.client,
        needs.map((n) => n.need),
        this.#opts.namespace,
        // Nothing is acted on while a rule stays missing: a complete listing that still lacks it
        // needs no access review, so each round is one request.
        { signal, confirm: "if-incomplete" },
      );
    } catch (err) {
      if (signal?.aborted) return;
      log.debug("RBAC re-check failed: {error}", { error: errorMessage(err) });
      return;
    }
    const allowed = new Set(report.answers.filter((a) => a.allowed === true).map((a) => a.need));
    for (const feature of off) {
      const still = (this.#missing.get(feature) ?? []).filter((n) => !allowed.has(n.need));
      this.#missing.set(feature, still);
      if (still.length > 0) {
        log.debug("{feature} stays off: still missing {missing}", {
          feature,
          missing: describeNeeds(still).join("; "),
        });
        continue;
      }
      this.#unanswered.delete(feature);
      rbacFeatureEnabled.set({ feature }, 1);
      log.info("{feature} is on: its RBAC permissions were granted ({does})", {
        feature,
        does: RBAC_FEATURES[feature].does,
      });
      const waiting = this.#waiting.get(feature) ?? [];
      this.#waiting.delete(feature);
      for (const fn of waiting) {
        try {
          fn();
        } catch (err) {
          log.error("turning on {feature} failed: {error}", {
            feature,
            error: errorMessage(err),
          });
        }
      }
    }
  }

  /** The start-up log lines: one Warning per feature that is off, and any unchecked row. */
  logStart(report: AccessReport): void {
    const recheck = this.#opts.recheckMs > 0
      ? `checked again every ${Math.round(this.#opts.recheckMs / 1000)} s, no restart needed`
      : "checked at start only (--rbac-recheck-seconds=0): restart after changing the role";
    for (const feature of this.#off()) {
      const missing = this.#missing.get(feature) ?? [];
      const unanswered = this.#unanswered.get(feature);
      const why = unanswered
        ? `its RBAC permissions could not be checked (${unanswered})`
        : `the operator's RBAC role lacks ${describeNeeds(missing).join("; ")}`;
      log.warn(
        "{feature} is off ({does}): {why}; {whenOff}. To turn it on, add this rule to the " +
          "operator's ClusterRole: {rule} ({recheck})",
        {
          feature,
          does: RBAC_FEATURES[feature].does,
          why,
          whenOff: RBAC_FEATURES[feature].whenOff,
          rule: ruleYaml(missing),
          missing: describeNeeds(missing),
          recheck,
        },
      );
    }
    if (this.uncheckedRequired.length > 0) {
      log.warn(
        "could not check the RBAC permissions {unchecked} ({error}); assuming they are granted",
        {
          unchecked: describeNeeds(this.uncheckedRequired).join("; "),
          error: report.rulesError ?? "access review failed",
        },
      );
    }
    log.debug("RBAC checked with {requests} request(s), rules review complete: {complete}", {
      requests: report.requests,
      complete: !report.incomplete,
    });
  }

  #off(): RbacFeature[] {
    return this.features().filter((f) => !this.enabled(f));
  }
}

/**
 * The one stderr line of a start refused for missing required rows: every missing rule, and
 * where the rules come from.
 */
export function describeMissingRequired(missing: readonly RbacNeed[]): string {
  return `the operator's RBAC role lacks permissions it cannot run without (the Go original's ` +
    `ClusterRole grants them too): ${describeNeeds(missing).join("; ")}; grant them ` +
    `(config/rbac, docs/installation.md "The ClusterRole") and restart`;
}
