/**
 * Leader election over a coordination.k8s.io/v1 Lease, following client-go's
 * tools/leaderelection with the LeaseLock: candidates poll the Lease every retry period, a
 * holder's claim is honoured until leaseDuration has passed since this candidate last saw the
 * record change (local observation time, so clock skew between nodes does not matter), the
 * leader renews every retry period and gives up when renewals keep failing for renewDeadline.
 * Defaults are controller-runtime's: 15 s lease, 10 s renew deadline, 2 s retry period.
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "./client.ts";
import { type Clock, realClock, sleep } from "./clock.ts";
import { type Lease, Leases, type LeaseSpec } from "./core.ts";
import { permittedEnv } from "./env.ts";
import { errorText, isNotFound } from "./errors.ts";
import { rfc3339Micro } from "./time.ts";
import type { EventRecorder } from "./events.ts";
import { leaderElectionMasterStatus } from "./metrics.ts";

const log = getLogger(["cocoon-operator", "leaderelection"]);

/** Where a pod's service account token mounts its namespace. */
export const IN_CLUSTER_NAMESPACE_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** client-go's JitterFactor for the acquire loop. */
const JITTER_FACTOR = 1.2;

/** How long after the observed expiry a standby tries, so it does not race the clock edge. */
const EXPIRY_MARGIN_MS = 100;

/** Why run() returned. */
export type LeaderElectionOutcome =
  /** The signal passed to run() aborted (shutdown). */
  | "cancelled"
  /** Leadership was held and then lost: renewals failed for renewDeadline. */
  | "lost";

export interface LeaderCallbacks {
  /**
   * Called (not awaited) once the lease is acquired. The signal aborts when leadership ends;
   * work guarded by the lease must stop then.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** Called whenever run() ends, whether or not this candidate ever led (as client-go). */
  onStoppedLeading(): void;
  /** Called when a different holder is observed, including the first one seen. */
  onNewLeader?(identity: string): void;
}

export interface LeaderElectorOptions extends LeaderCallbacks {
  /** Only get, create and update are used. */
  client: Pick<Client, "get" | "create" | "update" | "watch">;
  /** Lease namespace; when omitted, run() reads the pod's service-account namespace file. */
  namespace?: string;
  /** Lease name (the manager's LeaderElectionID). */
  name: string;
  /** Unique per process; see leaderIdentity(). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** On shutdown, hand the lease back so a successor need not wait for it to expire. */
  releaseOnCancel?: boolean;
  clock?: Clock;
  /** Source of randomness for the acquire jitter, in [0, 1); tests pass () => 0. */
  random?: () => number;
  /** Records "<identity> became leader" / "stopped leading" Events on the Lease. */
  recorder?: EventRecorder;
  /** Labels put on the Lease. */
  labels?: Record<string, string>;
  /** Where to read the namespace when `namespace` is omitted (tests). */
  namespaceFile?: string;
}

/** client-go's LeaderElectionRecord: the Lease spec fields the election reads and writes. */
interface ElectionRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions: number;
}

/**
 * "<name>_<uuid>", the shape of identity controller-runtime gives each manager process. The name
 * is the pod's (POD_NAME, else HOSTNAME, which a pod's hostname equals) rather than the OS
 * hostname, so no `--allow-sys` permission is needed; without either it is "cocoon-operator" and
 * the UUID alone keeps identities unique.
 */
export function leaderIdentity(env: (name: string) => string | undefined = permittedEnv): string {
  const name = env("POD_NAME") || env("HOSTNAME") || "cocoon-operator";
  return `${name}_${crypto.randomUUID()}`;
}

/**
 * The namespace for the Lease: the given one, else the service-account namespace file. Out of
 * cluster (no file) this fails, as controller-runtime does, with a hint at the fix.
 */
export async function leaderElectionNamespace(
  given?: string,
  file = IN_CLUSTER_NAMESPACE_PATH,
): Promise<string> {
  if (given) return given;
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new Error(
        `unable to find leader election namespace: not running in-cluster (${file} is missing); ` +
          "set --leader-election-namespace or POD_NAMESPACE, or disable leader election",
      );
    }
    throw new Error(`unable to read leader election namespace from ${file}: ${err}`, {
      cause: err,
    });
  }
  const ns = text.trim();
  if (!ns) throw new Error(`unable to find leader election namespace: ${file} is empty`);
  return ns;
}

/**
 * One candidate in a leader election. Construct, then await run(signal): it resolves when the
 * signal aborts ("cancelled") or when leadership is lost ("lost"); a manager exits non-zero on
 * "lost" so the replacement pod starts clean. With releaseOnCancel, abort the signal only after
 * the work started by onStartedLeading has stopped, or two leaders may overlap.
 */
export class LeaderElector {
  readonly #opts: LeaderElectorOptions;
  readonly #clock: Clock;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #random: () => number;
  #namespace = "";
  /** The Lease as last read or written; updates send its resourceVersion (optimistic lock). */
  #lease?: Lease;
  #observed: ElectionRecord = { holderIdentity: "", leaseDurationSeconds: 0, leaseTransitions: 0 };
  #observedRaw = "";
  #observedTime = 0;
  #reportedLeader = "";
  #running = false;

  constructor(opts: LeaderElectorOptions) {
    const leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    const retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    if (leaseDurationMs <= 0 || renewDeadlineMs <= 0 || retryPeriodMs <= 0) {
      throw new Error("leaseDuration, renewDeadline and retryPeriod must be greater than zero");
    }
    if (leaseDurationMs <= renewDeadlineMs) {
      throw new Error("leaseDuration must be greater than renewDeadline");
    }
    if (renewDeadlineMs <= JITTER_FACTOR * retryPeriodMs) {
      throw new Error("renewDeadline must be greater than retryPeriod*1.2");
    }
    if (leaseDurationMs < 1000) {
      // The Lease stores whole seconds; less would round to a zero-length lease.
      throw new Error("leaseDuration must be at least one second");
    }
    if (!opts.identity) throw new Error("leader election identity is empty");
    if (!opts.name) throw new Error("leader election lease name is empty");
    this.#opts = opts;
    this.#clock = opts.clock ?? realClock;
    this.#leaseDurationMs = leaseDurationMs;
    this.#renewDeadlineMs = renewDeadlineMs;
    this.#retryPeriodMs = retryPeriodMs;
    this.#random = opts.random ?? Math.random;
    leaderElectionMasterStatus.set({ name: opts.name }, 0);
  }

  /** This candidate's identity. */
  get identity(): string {
    return this.#opts.identity;
  }

  /** The last observed holder ("" when none observed yet). */
  getLeader(): string {
    return this.#observed.holderIdentity;
  }

  /** True when the last observed holder is this candidate. */
  isLeader(): boolean {
    return this.#observed.holderIdentity === this.#opts.identity;
  }

  /**
   * Liveness check for a leader whose renew loop is stuck: fails once the lease it holds is
   * older than leaseDuration + maxTolerableExpiredMs (client-go's HealthzAdaptor).
   */
  check(maxTolerableExpiredMs: number): void {
    if (!this.isLeader()) return;
    if (this.#clock.now() - this.#observedTime > this.#leaseDurationMs + maxTolerableExpiredMs) {
      throw new Error(`failed election to renew leadership on lease ${this.#opts.name}`);
    }
  }

  /** Campaigns, leads, and returns when cancelled or when leadership is lost. */
  async run(signal: AbortSignal): Promise<LeaderElectionOutcome> {
    if (this.#running) throw new Error("LeaderElector.run called twice");
    this.#running = true;
    try {
      this.#namespace = await leaderElectionNamespace(
        this.#opts.namespace,
        this.#opts.namespaceFile,
      );
      if (!(await this.#acquire(signal))) return "cancelled";
      const leading = new AbortController();
      const stopLeading = () => leading.abort();
      signal.addEventListener("abort", stopLeading, { once: true });
      this.#startLeading(leading.signal);
      let outcome: LeaderElectionOutcome;
      try {
        outcome = await this.#renew(signal);
      } finally {
        signal.removeEventListener("abort", stopLeading);
        leading.abort();
        leaderElectionMasterStatus.set({ name: this.#opts.name }, 0);
        this.#recordEvent("stopped leading");
      }
      if (this.#opts.releaseOnCancel ?? true) await this.#release();
      return outcome;
    } finally {
      this.#safely("onStoppedLeading", () => this.#opts.onStoppedLeading());
    }
  }

  /** Polls until the lease is ours; false when the signal aborted first. */
  async #acquire(signal: AbortSignal): Promise<boolean> {
    log.info("attempting to acquire leader lease {lease}", { lease: this.#describe() });
    // Unlike client-go, a standby also watches the Lease and retries as soon as the holder
    // hands it back, so a graceful rollover does not wait out the jittered retry period.
    let wake = new AbortController();
    const stopWatch = new AbortController();
    const watching = this.#watchForRelease(
      AbortSignal.any([signal, stopWatch.signal]),
      () => wake.abort(),
    );
    try {
      while (!signal.aborted) {
        const ok = await this.#tryAcquireOrRenew(signal);
        this.#maybeReportTransition();
        if (ok) {
          this.#recordEvent("became leader");
          leaderElectionMasterStatus.set({ name: this.#opts.name }, 1);
          log.info("successfully acquired lease {lease}", { lease: this.#describe() });
          return true;
        }
        log.debug("failed to acquire lease {lease}", { lease: this.#describe() });
        await sleep(this.#clock, this.#acquireWaitMs(), AbortSignal.any([signal, wake.signal]));
        wake = new AbortController();
      }
      return false;
    } finally {
      stopWatch.abort();
      await watching;
    }
  }

  /**
   * The pause before the next acquire attempt: client-go's jittered retry period, cut short
   * to just after the observed holder's lease runs out, so a crashed leader is replaced one
   * lease duration after its last renewal rather than up to a jittered retry later.
   */
  #acquireWaitMs(): number {
    const jittered = this.#retryPeriodMs * (1 + this.#random() * JITTER_FACTOR);
    if (!this.#observed.holderIdentity) return jittered;
    const untilExpiry = this.#observedTime + this.#observed.leaseDurationSeconds * 1000 -
      this.#clock.now();
    return Math.max(0, Math.min(jittered, untilExpiry + EXPIRY_MARGIN_MS));
  }

  /**
   * Follows the Lease while campaigning: a renewal seen here starts the holder's expiry clock
   * when it happens (not at the next poll), and a release (no holder, or deleted) wakes the
   * acquire loop at once.
   */
  async #watchForRelease(signal: AbortSignal, onRelease: () => void): Promise<void> {
    while (!signal.aborted) {
      try {
        const events = this.#opts.client.watch(Leases, {
          namespace: this.#namespace,
          fieldSelector: `metadata.name=${this.#opts.name}`,
          timeoutSeconds: 300,
          signal,
        });
        for await (const ev of events) {
          if (ev.type === "DELETED") onRelease();
          else if (ev.type === "ADDED" || ev.type === "MODIFIED") {
            if (!ev.object.spec?.holderIdentity) onRelease();
            else this.#observe(fromLeaseSpec(ev.object.spec));
          }
        }
      } catch (err) {
        if (!signal.aborted) {
          log.debug("watch of lease {lease} failed: {error}", {
            lease: this.#describe(),
            error: errorText(err),
          });
        }
      }
      // The watch is only a shortcut; the polling loop stays authoritative.
      await sleep(this.#clock, this.#retryPeriodMs, signal);
    }
  }

  /** Renews every retry period until cancelled ("cancelled") or renewals time out ("lost"). */
  async #renew(signal: AbortSignal): Promise<LeaderElectionOutcome> {
    while (!signal.aborted) {
      const renewed = await this.#renewWithinDeadline(signal);
      this.#maybeReportTransition();
      if (signal.aborted) return "cancelled";
      if (!renewed) {
        log.info("failed to renew lease {lease}: timed out after {deadlineMs} ms", {
          lease: this.#describe(),
          deadlineMs: this.#renewDeadlineMs,
        });
        return "lost";
      }
      log.debug("successfully renewed lease {lease}", { lease: this.#describe() });
      await sleep(this.#clock, this.#retryPeriodMs, signal);
    }
    return "cancelled";
  }

  /** Tries every retry period until one renewal succeeds or renewDeadline passes. */
  async #renewWithinDeadline(signal: AbortSignal): Promise<boolean> {
    const deadline = new AbortController();
    const timer = this.#clock.setTimeout(() => deadline.abort(), this.#renewDeadlineMs);
    const combined = AbortSignal.any([signal, deadline.signal]);
    try {
      while (!combined.aborted) {
        if (await this.#tryAcquireOrRenew(combined)) return true;
        await sleep(this.#clock, this.#retryPeriodMs, combined);
      }
      return false;
    } finally {
      this.#clock.clearTimeout(timer);
    }
  }

  /** client-go's tryAcquireOrRenew: one attempt to take or extend the lease. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = this.#clock.now();
    const desired: ElectionRecord = {
      holderIdentity: this.#opts.identity,
      leaseDurationSeconds: Math.floor(this.#leaseDurationMs / 1000),
      acquireTime: rfc3339Micro(now),
      renewTime: rfc3339Micro(now),
      leaseTransitions: 0,
    };

    // 1. Fast path: the leader assumes its last write is still current and updates blindly.
    if (this.isLeader() && this.#isLeaseValid(now) && this.#lease) {
      desired.acquireTime = this.#observed.acquireTime;
      desired.leaseTransitions = this.#observed.leaseTransitions;
      try {
        await this.#update(desired, signal);
        this.#setObserved(desired);
        return true;
      } catch (err) {
        log.warn(
          "failed to update lease {lease} optimistically, falling back to slow path: " +
            "{error}",
          { lease: this.#describe(), error: errorText(err) },
        );
      }
    }

    // 2. Read the current record, creating the Lease when there is none.
    let lease: Lease;
    try {
      lease = await this.#call(
        signal,
        (s) => this.#opts.client.get(Leases, this.#namespace, this.#opts.name, { signal: s }),
      );
    } catch (err) {
      if (!isNotFound(err)) {
        log.warn("error retrieving lease {lease}: {error}", {
          lease: this.#describe(),
          error: errorText(err),
        });
        return false;
      }
      try {
        this.#lease = await this.#call(signal, (s) =>
          this.#opts.client.create(Leases, {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: {
              name: this.#opts.name,
              namespace: this.#namespace,
              ...(this.#opts.labels ? { labels: { ...this.#opts.labels } } : {}),
            },
            spec: toLeaseSpec(desired),
          }, { signal: s }));
      } catch (err) {
        log.warn("error initially creating lease {lease}: {error}", {
          lease: this.#describe(),
          error: errorText(err),
        });
        return false;
      }
      this.#setObserved(desired);
      return true;
    }
    this.#lease = lease;

    // 3. A changed record restarts this candidate's expiry clock for the holder.
    const current = fromLeaseSpec(lease.spec);
    this.#observe(current);
    if (current.holderIdentity && this.#isLeaseValid(now) && !this.isLeader()) {
      log.debug("lease {lease} is held by {holder} and has not yet expired", {
        lease: this.#describe(),
        holder: current.holderIdentity,
      });
      return false;
    }

    // 4. Take it over (or renew through the slow path).
    if (this.isLeader()) {
      desired.acquireTime = current.acquireTime;
      desired.leaseTransitions = current.leaseTransitions;
    } else {
      desired.leaseTransitions = current.leaseTransitions + 1;
    }
    try {
      await this.#update(desired, signal);
    } catch (err) {
      log.warn("failed to update lease {lease}: {error}", {
        lease: this.#describe(),
        error: errorText(err),
      });
      return false;
    }
    this.#setObserved(desired);
    return true;
  }

  /** Hands the lease back: empty holder, 1 s duration, so a successor takes it at once. */
  async #release(): Promise<boolean> {
    // Shutdown is under way, so the outer signal has aborted; give the release its own budget.
    const budget = new AbortController();
    const timer = this.#clock.setTimeout(() => budget.abort(), this.#renewDeadlineMs);
    try {
      let current: Lease;
      try {
        current = await this.#call(
          budget.signal,
          (s) => this.#opts.client.get(Leases, this.#namespace, this.#opts.name, { signal: s }),
        );
      } catch (err) {
        if (isNotFound(err)) log.info("lease {lease} not found", { lease: this.#describe() });
        else {
          log.error("error retrieving lease {lease}: {error}", {
            lease: this.#describe(),
            error: errorText(err),
          });
        }
        return false;
      }
      this.#lease = current;
      // client-go checks only its observed record; also checking the fresh one means a lease
      // someone else took while our API calls were failing is never wiped.
      if (!this.isLeader() || current.spec?.holderIdentity !== this.#opts.identity) return true;
      const now = rfc3339Micro(this.#clock.now());
      const released: ElectionRecord = {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: fromLeaseSpec(current.spec).leaseTransitions,
      };
      try {
        await this.#update(released, budget.signal);
      } catch (err) {
        log.error("failed to release lease {lease}: {error}", {
          lease: this.#describe(),
          error: errorText(err),
        });
        return false;
      }
      this.#setObserved(released);
      log.info("released lease {lease}", { lease: this.#describe() });
      return true;
    } finally {
      this.#clock.clearTimeout(timer);
    }
  }

  /** Writes the record onto the last seen Lease (its resourceVersion makes this a CAS). */
  async #update(record: ElectionRecord, signal: AbortSignal): Promise<void> {
    const base = this.#lease;
    if (!base) throw new Error("lease not initialized, get or create it first");
    const next: Lease = {
      ...base,
      metadata: {
        ...base.metadata,
        ...(this.#opts.labels ? { labels: { ...base.metadata.labels, ...this.#opts.labels } } : {}),
      },
      spec: toLeaseSpec(record),
    };
    this.#lease = await this.#call(
      signal,
      (s) => this.#opts.client.update(Leases, next, { signal: s }),
    );
  }

  /**
   * Runs one API call bounded by the signal and by half the renew deadline (at least 1 s), the
   * request timeout controller-runtime gives its leader-election client. The race ensures a
   * client that ignores the signal cannot stall the loop.
   */
  async #call<T>(signal: AbortSignal, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timeout = new AbortController();
    const timer = this.#clock.setTimeout(
      () => timeout.abort(new Error("leader election request timed out")),
      Math.max(this.#renewDeadlineMs / 2, 1000),
    );
    const combined = AbortSignal.any([signal, timeout.signal]);
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(combined.reason ?? new Error("aborted"));
      if (combined.aborted) onAbort();
      else combined.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([fn(combined), aborted]);
    } finally {
      combined.removeEventListener("abort", onAbort);
      this.#clock.clearTimeout(timer);
    }
  }

  #isLeaseValid(now: number): boolean {
    return this.#observedTime + this.#observed.leaseDurationSeconds * 1000 > now;
  }

  /** Records a record read from the server; only a change restarts the expiry clock. */
  #observe(record: ElectionRecord): void {
    const raw = JSON.stringify(record);
    if (raw === this.#observedRaw) return;
    this.#setObserved(record);
    this.#observedRaw = raw;
  }

  #setObserved(record: ElectionRecord): void {
    this.#observed = { ...record };
    this.#observedTime = this.#clock.now();
  }

  #maybeReportTransition(): void {
    const holder = this.#observed.holderIdentity;
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    const cb = this.#opts.onNewLeader;
    if (cb) queueMicrotask(() => this.#safely("onNewLeader", () => cb(holder)));
  }

  #startLeading(signal: AbortSignal): void {
    queueMicrotask(() => {
      try {
        Promise.resolve(this.#opts.onStartedLeading(signal)).catch((err) =>
          log.error("onStartedLeading failed: {error}", { error: errorText(err) })
        );
      } catch (err) {
        log.error("onStartedLeading failed: {error}", { error: errorText(err) });
      }
    });
  }

  #recordEvent(what: string): void {
    const recorder = this.#opts.recorder;
    if (!recorder || !this.#lease) return;
    recorder.event(
      {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { ...this.#lease.metadata },
      },
      "Normal",
      "LeaderElection",
      `${this.#opts.identity} ${what}`,
    );
  }

  #safely(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      log.error("{callback} failed: {error}", { callback: what, error: errorText(err) });
    }
  }

  #describe(): string {
    return `${this.#namespace}/${this.#opts.name}`;
  }
}

function fromLeaseSpec(spec: LeaseSpec | undefined): ElectionRecord {
  return {
    holderIdentity: spec?.holderIdentity ?? "",
    leaseDurationSeconds: spec?.leaseDurationSeconds ?? 0,
    acquireTime: spec?.acquireTime,
    renewTime: spec?.renewTime,
    leaseTransitions: spec?.leaseTransitions ?? 0,
  };
}

function toLeaseSpec(record: ElectionRecord): LeaseSpec {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    ...(record.acquireTime ? { acquireTime: record.acquireTime } : {}),
    ...(record.renewTime ? { renewTime: record.renewTime } : {}),
    leaseTransitions: record.leaseTransitions,
  };
}
