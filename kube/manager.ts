import { getLogger } from "@logtape/logtape";
import type { ControllerHost } from "./builder.ts";
import { type ByObject, type CacheOptions, InformerCache } from "./cache.ts";
import type { Client, Reader } from "./client.ts";
import { type EventRecorder, Recorder } from "./events.ts";
import { leaderElectionNamespace, LeaderElector, leaderIdentity } from "./leader.ts";
import type { KubeObject } from "./object.ts";
import type { ResourceType } from "./resource.ts";
import type { Runnable } from "./runnable.ts";
import { type Checker, Servers, type ServersOptions } from "./servers.ts";
import type { IndexFunc } from "./store.ts";
import type { Informer } from "./source.ts";
import { errorText } from "./errors.ts";

const log = getLogger(["cocoon-operator", "manager"]);

export interface ManagerOptions {
  /** The API client: writes, uncached reads, and the informers' list/watch. */
  client: Client;
  metricsBindAddress: string;
  /** TLS and the authentication filter for /metrics (servers.ts); plain http when unset. */
  metricsSecurity?: ServersOptions["metricsSecurity"];
  /** HTTP/2 on the metrics listener as well (servers.ts); default HTTP/1.1 only. */
  metricsHttp2?: boolean;
  healthProbeBindAddress: string;
  leaderElection: boolean;
  /** Lease name (the Go operator's LeaderElectionID). */
  leaderElectionId: string;
  /** Lease namespace; defaults to the pod's service-account namespace. */
  leaderElectionNamespace?: string;
  /** Lease timings (controller-runtime defaults: 15 s / 10 s / 2 s). */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** How long start() waits for the caches to sync before failing (controller-runtime: 2 min). */
  cacheSyncTimeoutMs?: number;
  /**
   * Bound on writing the queued Events at shutdown (controller-runtime's graceful shutdown
   * timeout: 30 s). Each controller bounds its own drain with its drainTimeoutMs.
   */
  gracefulShutdownTimeoutMs?: number;
  /** Event source component. */
  eventComponent?: string;
  /** Watch one namespace only (tests); default all. */
  cacheNamespace?: string;
  /**
   * Per-kind label/field selectors and transforms of the cache (see ObjectScope; build entries
   * with byObject(rt, scope)). Objects outside a kind's scope are invisible to the cache and the
   * cached client: read them with apiReader. Code that wires controllers later can still call
   * cache.configure(rt, scope) before anything asks for that kind's informer.
   */
  byObject?: ByObject[];
  /** Identity in the Lease; default hostname_uuid. */
  identity?: string;
  /**
   * /healthz fails (check "informers") once an informer has heard nothing from the API server
   * for this long (see SharedInformer.msSinceProgress); 0 or absent: no such check.
   */
  informerStallLimitMs?: number;
  /**
   * Informers sync with watch-list streams where the server serves them (client-go 0.35's
   * default), else LIST then WATCH; default false (LIST then WATCH).
   */
  watchList?: boolean;
  /** Per-informer tuning (watch timeouts, deadlines, backoff) for tests. */
  informerDefaults?: CacheOptions["informerDefaults"];
  /** Scopes every namespaced informer to these hash ranges (a sharded replica; cache.ts). */
  cacheShard?: CacheOptions["shard"];
}

/** How start() ended: a clean shutdown, or leadership lost (the process must exit non-zero). */
export type ManagerOutcome = "stopped" | "leadership-lost";

/**
 * Reads from the cache, writes (and watches) through the API: controller-runtime's default
 * client. Reconcilers read what the informers already hold and never hit the API to look.
 */
export class CachedClient implements Client {
  constructor(readonly cache: Reader, readonly api: Client) {}
  get: Client["get"] = (rt, ns, name, opts) => this.cache.get(rt, ns, name, opts);
  list: Client["list"] = (rt, opts) => this.cache.list(rt, opts);
  create: Client["create"] = (rt, obj, opts) => this.api.create(rt, obj, opts);
  update: Client["update"] = (rt, obj, opts) => this.api.update(rt, obj, opts);
  updateStatus: Client["updateStatus"] = (rt, obj, opts) => this.api.updateStatus(rt, obj, opts);
  patch: Client["patch"] = (rt, ns, name, type, body, opts) =>
    this.api.patch(rt, ns, name, type, body, opts);
  delete: Client["delete"] = (rt, ns, name, opts) => this.api.delete(rt, ns, name, opts);
  createSubresource: Client["createSubresource"] = (rt, ns, name, sub, body, opts) =>
    this.api.createSubresource(rt, ns, name, sub, body, opts);
  watch: Client["watch"] = (rt, opts) => this.api.watch(rt, opts);
}

/**
 * Wires the shared cache, the controllers, leader election, the event recorder and the
 * probe/metrics servers, and runs them in controller-runtime's order: servers and caches on
 * every replica; controllers only on the leader, after the caches synced; on shutdown the
 * controllers drain first, then the lease is released, then the rest stops.
 */
export class Manager implements ControllerHost {
  readonly cache: InformerCache;
  /** Cached reads, API writes. */
  readonly client: Client;
  /**
   * Uncached reads straight from the API server (controller-runtime's APIReader): the way to see
   * objects a kind's cache scope (ManagerOptions.byObject) leaves out.
   */
  readonly apiReader: Reader;
  readonly recorder: EventRecorder;
  readonly servers: Servers;
  readonly #opts: ManagerOptions;
  readonly #recorder: Recorder;
  readonly #leaderRunnables: Runnable[] = [];
  readonly #otherRunnables: Runnable[] = [];
  #elected = false;

  constructor(opts: ManagerOptions) {
    this.#opts = opts;
    this.cache = new InformerCache({
      client: opts.client,
      namespace: opts.cacheNamespace,
      byObject: opts.byObject,
      shard: opts.cacheShard,
      informerDefaults: opts.watchList
        ? { watchList: true, ...opts.informerDefaults }
        : opts.informerDefaults,
    });
    this.client = new CachedClient(this.cache, opts.client);
    this.apiReader = opts.client;
    this.#recorder = new Recorder({
      client: opts.client,
      component: opts.eventComponent ?? "cocoon-operator",
    });
    this.recorder = this.#recorder;
    this.servers = new Servers({
      healthProbeBindAddress: opts.healthProbeBindAddress,
      metricsBindAddress: opts.metricsBindAddress,
      metricsSecurity: opts.metricsSecurity,
      metricsHttp2: opts.metricsHttp2,
    });
    // Ready only once every informer has synced, so a rollout waits for a warm cache.
    this.servers.addReadyzCheck("cache-sync", () => {
      if (!this.cache.hasSynced()) throw new Error("caches not synced");
    });
    const stallLimitMs = opts.informerStallLimitMs ?? 0;
    if (stallLimitMs > 0) {
      // Live only while every informer hears from the API server: a watch that stalls is
      // restarted by its deadline, and one that keeps stalling lets the kubelet restart us.
      this.servers.addHealthzCheck("informers", () => {
        const stalled = this.cache.stalled(stallLimitMs);
        if (stalled.length === 0) return;
        throw new Error(
          "no progress from the API server for " +
            stalled.map((s) => `${s.kind} (${Math.round(s.ms / 1000)} s)`).join(", "),
        );
      });
    }
  }

  informerFor<T extends KubeObject>(rt: ResourceType<T>): Informer<T> {
    return this.cache.informerFor(rt);
  }

  /** Registers a field index on a kind's informer (before start). */
  indexField<T extends KubeObject>(rt: ResourceType<T>, field: string, fn: IndexFunc<T>): void {
    this.cache.indexField(rt, field, fn);
  }

  add(runnable: Runnable): void {
    (runnable.needLeaderElection === false ? this.#otherRunnables : this.#leaderRunnables)
      .push(runnable);
  }

  addHealthzCheck(name: string, check: Checker): void {
    this.servers.addHealthzCheck(name, check);
  }

  addReadyzCheck(name: string, check: Checker): void {
    this.servers.addReadyzCheck(name, check);
  }

  /** True while this process holds the lease (or leader election is off and it started). */
  get elected(): boolean {
    return this.#elected;
  }

  /**
   * Runs until the signal aborts (→ "stopped") or leadership is lost (→ "leadership-lost").
   * Everything started here is stopped before it returns.
   */
  async start(signal: AbortSignal): Promise<ManagerOutcome> {
    const opts = this.#opts;
    const namespace = opts.leaderElection
      ? await leaderElectionNamespace(opts.leaderElectionNamespace)
      : "";
    const stopAll = new AbortController();
    const onAbort = () => stopAll.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    // As in controller-runtime, the first runnable to fail while the manager runs stops it,
    // and start() rejects with that error once everything has shut down. Failures after the
    // stop began are only logged.
    let failure: { err: unknown } | undefined;
    const fail = (err: unknown) => {
      if (stopAll.signal.aborted) return;
      failure = { err };
      stopAll.abort(err);
    };
    // The probe listener is bound at once; the metrics listener may first load its HTTP/1.1
    // server (kube/servers.ts), which then overlaps the caches' first requests. A listener that
    // cannot bind stops everything and fails the start.
    const listening = this.servers.start();
    listening.catch(() => {});
    const running: Promise<void>[] = [];
    let outcome: ManagerOutcome;
    try {
      this.cache.start(stopAll.signal);
      await listening;
      for (const r of this.#otherRunnables) running.push(runLogged(r, stopAll.signal, fail));
      outcome = await this.#run(stopAll, namespace, fail);
    } finally {
      signal.removeEventListener("abort", onAbort);
      stopAll.abort();
      await Promise.allSettled(running);
      await this.cache.stopped();
      // Bounded: an API server that stopped answering must not hold the exit hostage.
      await this.#recorder.close(opts.gracefulShutdownTimeoutMs ?? 30_000);
      await this.servers.close();
    }
    if (failure) throw failure.err;
    return outcome;
  }

  /**
   * Waits for every informer to sync, bounded like controller-runtime's CacheSyncTimeout: a
   * cache that cannot sync (a missing list permission, an unserved kind) fails the manager
   * with the kinds named, instead of leaving a pod that is never ready.
   */
  async #waitForCaches(stop: AbortSignal): Promise<void> {
    const limitMs = this.#opts.cacheSyncTimeoutMs ?? 120_000;
    const expired = new AbortController();
    const timer = setTimeout(() => expired.abort(), limitMs);
    try {
      await this.cache.waitForSync(AbortSignal.any([stop, expired.signal]));
    } catch (err) {
      if (stop.aborted) return;
      if (expired.signal.aborted) {
        throw new Error(
          `timed out after ${limitMs} ms waiting for caches to sync: ` +
            this.cache.unsynced().join(", "),
        );
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for the caches, then runs the leader work (under election if enabled). */
  async #run(
    stopAll: AbortController,
    namespace: string,
    fail: (err: unknown) => void,
  ): Promise<ManagerOutcome> {
    const opts = this.#opts;
    await this.#waitForCaches(stopAll.signal);
    if (stopAll.signal.aborted) return "stopped";
    log.info("caches synced");

    if (!opts.leaderElection) {
      this.#elected = true;
      await this.#runLeaderWork(stopAll.signal, fail);
      return "stopped";
    }
    let outcome: ManagerOutcome = "stopped";
    let work: Promise<void> | undefined;
    // The elector gets its own signal, aborted only after the controllers drained, so the
    // lease is released only once no reconcile of ours is still writing.
    const electorStop = new AbortController();
    // Leadership ending while no stop was asked for means it was lost: like controller-runtime
    // (which skips graceful shutdown then), cancel the guarded work at once instead of letting
    // it drain while another replica may already lead.
    const lost = new AbortController();
    const elector = new LeaderElector({
      client: opts.client,
      namespace,
      name: opts.leaderElectionId,
      identity: opts.identity ?? leaderIdentity(),
      leaseDurationMs: opts.leaseDurationMs ?? 15_000,
      renewDeadlineMs: opts.renewDeadlineMs ?? 10_000,
      retryPeriodMs: opts.retryPeriodMs ?? 2_000,
      releaseOnCancel: true,
      recorder: this.recorder,
      onStartedLeading: (leading) => {
        this.#elected = true;
        log.info("became leader of {lease}", { lease: `${namespace}/${opts.leaderElectionId}` });
        leading.addEventListener("abort", () => {
          if (!electorStop.signal.aborted) lost.abort(new Error("leader election lost"));
        }, { once: true });
        work = this.#runLeaderWork(AbortSignal.any([leading, stopAll.signal]), fail, lost.signal);
      },
      onStoppedLeading: () => {
        this.#elected = false;
      },
      onNewLeader: (id) => log.info("current leader is {identity}", { identity: id }),
    });
    const election = elector.run(electorStop.signal);
    const ended = await Promise.race([
      election.then((r) => ({ kind: "election" as const, r })),
      new Promise<{ kind: "signal" }>((resolve) => {
        if (stopAll.signal.aborted) resolve({ kind: "signal" });
        stopAll.signal.addEventListener("abort", () => resolve({ kind: "signal" }), {
          once: true,
        });
      }),
    ]);
    if (ended.kind === "election" && ended.r === "lost") {
      outcome = "leadership-lost";
      log.error("leader election lost");
      stopAll.abort(new Error("leader election lost"));
    }
    await work;
    electorStop.abort();
    await election;
    return outcome;
  }

  /** Starts every leader runnable and waits for all of them to stop. */
  async #runLeaderWork(
    signal: AbortSignal,
    fail: (err: unknown) => void,
    abortSignal?: AbortSignal,
  ): Promise<void> {
    await Promise.all(this.#leaderRunnables.map((r) => runLogged(r, signal, fail, abortSignal)));
  }
}

/** Runs r until it returns; a rejection is logged and reported, never left unhandled. */
async function runLogged(
  r: Runnable,
  signal: AbortSignal,
  fail: (err: unknown) => void,
  abortSignal?: AbortSignal,
): Promise<void> {
  try {
    await r.start(signal, abortSignal);
  } catch (err) {
    log.error("runnable failed: {error}", { error: errorText(err) });
    fail(err);
  }
}
