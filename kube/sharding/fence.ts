/**
 * The leader Lease as a fence around a shard group. A single-leader operator (this one without
 * `--shards`, or the Go original) reconciles only while it holds the leader Lease; shard members
 * take no part in that election, so without a fence a sharded replica and a single leader could
 * reconcile the same objects during a rolling update or a rollback. The group therefore keeps
 * that Lease itself:
 *
 * - a member reconciles only while the Lease is held by the group: by itself (renewed within
 *   the renew deadline) or by another member whose renewal it saw within the renew deadline;
 * - a Lease held by anyone else (a foreign holder) is waited out as a leader-election candidate
 *   would: until it is released or left unchanged for its lease duration, on this member's clock;
 * - one member holds and renews it every round; another takes it over (a compare-and-swap on the
 *   resourceVersion it read) when the holder leaves, dies or stops renewing, so the record keeps
 *   changing while any member runs and a foreign candidate never sees it expire;
 * - the group never releases it: the last member to go leaves it to expire, as the Go original
 *   does, because a member that is still draining may be counting on it.
 *
 * The decision of a round is the pure {@linkcode decideFence}; {@linkcode LeaderFence} reads and
 * writes the Lease and keeps the acting deadline. membership.ts calls it at the end of each round
 * with the members it just listed.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../client.ts";
import type { Clock } from "../clock.ts";
import { type Lease, Leases } from "../core.ts";
import { errorText, isAlreadyExists, isConflict, isNotFound } from "../errors.ts";
import { rfc3339Micro } from "../time.ts";
import type { MemberView } from "./members.ts";
import type { ShardTiming } from "./timing.ts";

const log = getLogger(["cocoon-operator", "sharding"]);

/**
 * Who holds the leader Lease, as this member sees it:
 * - "unknown": not read yet;
 * - "ours": this member;
 * - "member": another member of the group;
 * - "foreign": a holder outside the group whose Lease has not expired;
 * - "free": no Lease, no holder, or a foreign holder whose Lease expired.
 */
export type FenceStatus = "unknown" | "ours" | "member" | "foreign" | "free";

/** What one round knows. */
export interface FenceInput {
  /** The Lease's holder and duration; undefined when there is no Lease. */
  readonly record?: { readonly holder: string; readonly leaseDurationMs: number };
  /** How long ago (this member's clock) the record was last seen to change. */
  readonly sinceChangeMs: number;
  readonly self: string;
  /** This member is shutting down. */
  readonly leaving: boolean;
  /** The other members as last listed. */
  readonly members: readonly MemberView[];
  /** Identities this member has seen in the group (listed now or earlier), itself included. */
  readonly known: ReadonlySet<string>;
  /** A live member's unchanged record is taken over after this long. */
  readonly takeoverAfterMs: number;
}

/** The status and the write a round should make: renew its own hold, or take the Lease. */
export interface FenceDecision {
  readonly status: FenceStatus;
  readonly write: "none" | "renew" | "take";
}

/** The decision of one round (pure). */
export function decideFence(input: FenceInput): FenceDecision {
  const { record, leaving } = input;
  if (!record || !record.holder) return { status: "free", write: leaving ? "none" : "take" };
  if (record.holder === input.self) return { status: "ours", write: "renew" };
  if (input.known.has(record.holder)) {
    const holder = input.members.find((m) => m.identity === record.holder);
    const healthy = holder !== undefined && holder.live && !holder.leaving &&
      input.sinceChangeMs < input.takeoverAfterMs;
    if (healthy) return { status: "member", write: "none" };
    // A leaving member leaves the take-over to one that stays, when there is one.
    const stayer = input.members.some((m) => m.live && !m.leaving);
    return { status: "member", write: leaving && stayer ? "none" : "take" };
  }
  if (input.sinceChangeMs >= record.leaseDurationMs) {
    return { status: "free", write: leaving ? "none" : "take" };
  }
  return { status: "foreign", write: "none" };
}

export interface LeaderFenceOptions {
  client: Pick<Client, "get" | "create" | "update">;
  /** Namespace and name of the leader Lease. */
  namespace: string;
  name: string;
  /** This member's identity (its member Lease's holder). */
  identity: string;
  timing: ShardTiming;
  clock: Clock;
  /** The group now holds the Lease and this member may reconcile. */
  onOpen?: () => void;
  /** This member must stop reconciling (abort what runs): why, in a sentence. */
  onClose?: (reason: string) => void;
  /** A change of status (for logs, Events and metrics). */
  onStatus?: (status: FenceStatus, holder: string) => void;
}

/** How long after a forgotten identity was last listed it is dropped from the known set. */
const KNOWN_RETENTION_LEASES = 10;

/** One member's view and use of the leader Lease. */
export class LeaderFence {
  readonly #opts: LeaderFenceOptions;
  #status: FenceStatus = "unknown";
  #holder = "";
  /** Status and holder as last reported, so only changes are. */
  #reported = "";
  /** The Lease as last read or written (its resourceVersion makes a write a CAS). */
  #lease?: Lease;
  #observedVersion: string | undefined;
  #observedAt = 0;
  /** This member may reconcile until then (local clock); 0 while it may not. */
  #validUntil = 0;
  #open = false;
  #closeTimer?: number;
  readonly #known = new Map<string, number>();

  constructor(opts: LeaderFenceOptions) {
    this.#opts = opts;
  }

  /** The status after the last round. */
  get status(): FenceStatus {
    return this.#status;
  }

  /** The holder after the last round ("" when none). */
  get holder(): string {
    return this.#holder;
  }

  /** Whether this member may reconcile now. */
  open(): boolean {
    return this.#validUntil > this.#opts.clock.now();
  }

  /** One round: read (unless renewing its own hold), decide, write; then open or close. */
  async round(
    members: readonly MemberView[],
    leaving: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    const clock = this.#opts.clock;
    this.#remember(members);
    // The holder's fast path: renew on the version it wrote last; read only after a conflict.
    if (this.#status === "ours" && this.#lease && await this.#write("renew", signal)) {
      this.#settle("ours");
      return;
    }
    let lease: Lease | undefined;
    try {
      lease = await this.#call(
        signal,
        (s) => this.#opts.client.get(Leases, this.#opts.namespace, this.#opts.name, { signal: s }),
      );
    } catch (err) {
      if (!isNotFound(err)) {
        log.warn("could not read leader Lease {lease}: {error}", {
          lease: this.#describe(),
          error: errorText(err),
        });
        this.#settle(this.#status);
        return;
      }
    }
    this.#lease = lease;
    const version = lease?.metadata.resourceVersion ?? "";
    if (version !== this.#observedVersion) {
      this.#observedVersion = version;
      this.#observedAt = clock.now();
    }
    this.#holder = lease?.spec?.holderIdentity ?? "";
    const decision = decideFence({
      record: lease
        ? { holder: this.#holder, leaseDurationMs: (lease.spec?.leaseDurationSeconds ?? 0) * 1000 }
        : undefined,
      sinceChangeMs: clock.now() - this.#observedAt,
      self: this.#opts.identity,
      leaving,
      members,
      known: new Set(this.#known.keys()),
      takeoverAfterMs: this.#opts.timing.renewDeadlineMs / 2,
    });
    if (decision.write !== "none" && await this.#write(decision.write, signal)) {
      this.#settle("ours");
      return;
    }
    this.#settle(decision.status);
  }

  /** The member stopped: no more reconciling, no timer left behind. */
  stop(): void {
    if (this.#closeTimer !== undefined) this.#opts.clock.clearTimeout(this.#closeTimer);
    this.#closeTimer = undefined;
    this.#validUntil = 0;
    this.#open = false;
  }

  /** Records the status and the acting deadline it gives, and reports what changed. */
  #settle(status: FenceStatus): void {
    if (status === "member") {
      this.#validUntil = this.#observedAt + this.#opts.timing.renewDeadlineMs;
    } else if (status !== "ours") {
      this.#validUntil = 0;
    }
    this.#status = status;
    const reported = `${status}\0${this.#holder}`;
    if (reported !== this.#reported) {
      this.#reported = reported;
      this.#log();
      this.#opts.onStatus?.(status, this.#holder);
    }
    this.#updateOpen();
  }

  /** Opens or closes by the deadline, and arms the timer that closes at it. */
  #updateOpen(): void {
    const now = this.#opts.clock.now();
    if (this.#closeTimer !== undefined) this.#opts.clock.clearTimeout(this.#closeTimer);
    this.#closeTimer = undefined;
    if (this.#validUntil > now) {
      this.#closeTimer = this.#opts.clock.setTimeout(() => {
        this.#closeTimer = undefined;
        this.#updateOpen();
      }, this.#validUntil - now);
      if (!this.#open) {
        this.#open = true;
        log.info("shard member {identity} reconciles: leader Lease {lease} is held by {holder}", {
          identity: this.#opts.identity,
          lease: this.#describe(),
          holder: this.#holder,
        });
        this.#opts.onOpen?.();
      }
      return;
    }
    if (this.#open) {
      this.#open = false;
      const reason = this.#closeReason();
      log.warn("shard member {identity} stops reconciling: {reason}", {
        identity: this.#opts.identity,
        reason,
      });
      this.#opts.onClose?.(reason);
    }
  }

  #log(): void {
    const fields = {
      identity: this.#opts.identity,
      lease: this.#describe(),
      holder: this.#holder,
      seconds: Math.round(this.#leaseDurationSeconds()),
    };
    switch (this.#status) {
      case "foreign":
        log.info(
          "shard member {identity} waits: leader Lease {lease} is held by {holder}, which is not " +
            "a member of this shard group; nothing is reconciled until {holder} releases it or " +
            "leaves it unrenewed for {seconds} s",
          fields,
        );
        break;
      case "free":
        log.info(
          "shard member {identity} waits for leader Lease {lease} to be taken by the group",
          {
            ...fields,
          },
        );
        break;
      case "ours":
        log.info("shard member {identity} holds leader Lease {lease} for the shard group", fields);
        break;
      case "member":
        log.debug("leader Lease {lease} is held by shard member {holder}", fields);
        break;
    }
  }

  #leaseDurationSeconds(): number {
    return this.#lease?.spec?.leaseDurationSeconds ?? this.#opts.timing.leaseDurationMs / 1000;
  }

  #closeReason(): string {
    const lease = this.#describe();
    switch (this.#status) {
      case "foreign":
        return `leader Lease ${lease} is held by ${this.#holder}, outside the shard group`;
      case "free":
        return `leader Lease ${lease} is not held by the shard group`;
      default:
        return `leader Lease ${lease} not renewed by the shard group for ` +
          `${this.#opts.timing.renewDeadlineMs} ms`;
    }
  }

  /** Renews or takes the Lease; true when the write went through. */
  async #write(kind: "renew" | "take", signal: AbortSignal): Promise<boolean> {
    const sentAt = this.#opts.clock.now();
    const now = rfc3339Micro(sentAt);
    const durationSeconds = Math.floor(this.#opts.timing.leaseDurationMs / 1000);
    const current = this.#lease;
    try {
      if (!current) {
        this.#lease = await this.#call(signal, (s) =>
          this.#opts.client.create(Leases, {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: this.#opts.name, namespace: this.#opts.namespace },
            spec: {
              holderIdentity: this.#opts.identity,
              leaseDurationSeconds: durationSeconds,
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          }, { signal: s }));
      } else {
        const spec = current.spec ?? {};
        this.#lease = await this.#call(signal, (s) =>
          this.#opts.client.update(Leases, {
            ...current,
            spec: {
              ...spec,
              holderIdentity: this.#opts.identity,
              leaseDurationSeconds: durationSeconds,
              renewTime: now,
              ...(kind === "take"
                ? { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }
                : {}),
            },
          }, { signal: s }));
      }
    } catch (err) {
      // Read afresh next time: a conflict means someone else wrote it.
      this.#lease = undefined;
      const fields = { kind, lease: this.#describe(), error: errorText(err) };
      if (isConflict(err) || isAlreadyExists(err)) {
        log.debug("could not {kind} leader Lease {lease}: {error}", fields);
      } else {
        log.warn("could not {kind} leader Lease {lease}: {error}", fields);
      }
      return false;
    }
    this.#holder = this.#opts.identity;
    this.#observedVersion = this.#lease?.metadata.resourceVersion ?? "";
    this.#observedAt = sentAt;
    this.#validUntil = sentAt + this.#opts.timing.renewDeadlineMs;
    return true;
  }

  /** Adds the listed members to the known set; forgets those not listed for a long time. */
  #remember(members: readonly MemberView[]): void {
    const now = this.#opts.clock.now();
    this.#known.set(this.#opts.identity, now);
    for (const m of members) this.#known.set(m.identity, now);
    const forgetBefore = now - KNOWN_RETENTION_LEASES * this.#opts.timing.leaseDurationMs;
    for (const [identity, seen] of this.#known) {
      if (seen < forgetBefore) this.#known.delete(identity);
    }
  }

  /**
   * One request, cut off after a retry period like every membership request; the race keeps a
   * client that ignores the signal from stalling the round.
   */
  async #call<T>(signal: AbortSignal, fn: (s: AbortSignal) => Promise<T>): Promise<T> {
    const clock = this.#opts.clock;
    const cut = new AbortController();
    const timer = clock.setTimeout(
      () => cut.abort(new Error("leader Lease request timed out")),
      this.#opts.timing.retryPeriodMs,
    );
    const combined = AbortSignal.any([signal, cut.signal]);
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
      clock.clearTimeout(timer);
    }
  }

  #describe(): string {
    return `${this.#opts.namespace}/${this.#opts.name}`;
  }
}
