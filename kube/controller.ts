import { getLogger } from "@logtape/logtape";
import { type Clock, realClock, type TimerId } from "./clock.ts";
import type { Handler } from "./handler.ts";
import {
  activeWorkers,
  maxConcurrentReconciles,
  reconcileErrors,
  reconcilePanics,
  reconcileTime,
  reconcileTimeouts,
  reconcileTotal,
  terminalReconcileErrors,
} from "./metrics.ts";
import { errorMessage } from "./errors.ts";
import { keyString, type KubeObject, parseKey } from "./object.ts";
import { and, type Predicate } from "./predicates.ts";
import { LOW_PRIORITY, PriorityQueue } from "./priority_queue.ts";
import { defaultItemRateLimiter, type RateLimiter } from "./rate_limiter.ts";
import { isTerminalError, type Reconciler, type Request, type Result } from "./reconcile.ts";
import type { Informer } from "./source.ts";

const log = getLogger(["cocoon-operator", "controller"]);

/** Options of a {@link Controller}. Durations are milliseconds. */
export interface ControllerOptions {
  /** Names the controller in logs and metrics (`controller` label, queue name). */
  name: string;
  reconciler: Reconciler;
  /** Workers reconciling distinct keys in parallel; default 1. */
  maxConcurrentReconciles?: number;
  /** How long start() waits for every watched informer to sync; default 2 min. */
  cacheSyncTimeoutMs?: number;
  /**
   * On stop, how long in-flight reconciles may run before their signals are aborted and
   * start() returns anyway; default 30 s (the manager's default graceful shutdown).
   */
  drainTimeoutMs?: number;
  /** Aborts a single reconcile's signal after this long; 0/absent = no limit. */
  reconciliationTimeoutMs?: number;
  /**
   * Backoff for errors and `requeue`. Default: 5 ms doubling to 1000 s per key, no overall
   * bucket (controller-runtime's default with its priority queue).
   */
  rateLimiter?: RateLimiter;
  clock?: Clock;
  /** Whether the manager starts it only on the elected leader; default true. */
  needLeaderElection?: boolean;
}

const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 120_000;
const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
/** client-go's WaitForCacheSync polls every 100 ms. */
const SYNC_POLL_MS = 100;

/**
 * Runs a reconciler over a priority queue fed by informer events (controller-runtime's internal
 * Controller). Guarantees: a key is never reconciled by two workers at once; a change that
 * arrives mid-reconcile triggers one more pass afterwards; a thrown error requeues with
 * backoff and never kills a worker.
 *
 * Priorities: objects from an informer's initial list and updates whose resourceVersion did not change are queued at
 * {@link LOW_PRIORITY} (-100), every other event at 0, so real changes are reconciled before a
 * restart's replay of unchanged objects. A requeue keeps the priority the key was handed out
 * with, unless the result names another one.
 *
 * Outcome mapping (per reconcile, one `controller_runtime_reconcile_total` result):
 * - throws TerminalError (anywhere in the cause chain): logged, errors + terminal errors
 *   counted, not requeued;
 * - throws anything else: logged, errors counted, requeued rate-limited;
 * - `requeueAfter > 0`: backoff forgotten, key re-added after that delay;
 * - `requeue`: re-added rate-limited (the backoff keeps growing);
 * - otherwise: backoff forgotten.
 *
 * Panics: Go counts recovered panics in `controller_runtime_reconcile_panics_total`. The TS
 * equivalent of a programming fault is counted there: a thrown value that is not an Error,
 * or a ReferenceError, RangeError or TypeError — except a TypeError carrying a `cause`, which
 * is how fetch reports network failures. Panics are errors too: counted, logged, requeued.
 */
export class Controller {
  readonly name: string;
  readonly reconciler: Reconciler;
  readonly maxConcurrentReconciles: number;
  readonly needLeaderElection: boolean;
  readonly #clock: Clock;
  readonly #rateLimiter: RateLimiter;
  readonly #cacheSyncTimeoutMs: number;
  readonly #drainTimeoutMs: number;
  readonly #reconciliationTimeoutMs: number;
  #queue: PriorityQueue | undefined;
  /** Handler registrations waiting for start() (sources start with the controller). */
  #pendingWatches: (() => void)[] = [];
  readonly #informers: Informer<KubeObject>[] = [];
  #started = false;
  #sourcesStarted = false;
  #stopping = false;
  readonly #stopWaiters = new Set<() => void>();
  /** Aborts every in-flight reconcile's signal: fired when the drain deadline passes. */
  readonly #hardStop = new AbortController();
  #workers: Promise<void>[] = [];
  #inFlight = 0;
  /** What the workers call when set: the reconciler behind wrappers (wrapReconciler). */
  #wrapped: Reconciler | undefined;
  readonly #done: Promise<void>;
  #resolveDone!: () => void;
  readonly #m;

  constructor(opts: ControllerOptions) {
    if (!opts.name) throw new Error("must specify a name for the controller");
    this.name = opts.name;
    this.reconciler = opts.reconciler;
    this.maxConcurrentReconciles = Math.max(1, Math.floor(opts.maxConcurrentReconciles ?? 1));
    this.needLeaderElection = opts.needLeaderElection ?? true;
    this.#clock = opts.clock ?? realClock;
    this.#rateLimiter = opts.rateLimiter ?? defaultItemRateLimiter();
    this.#cacheSyncTimeoutMs = opts.cacheSyncTimeoutMs || DEFAULT_CACHE_SYNC_TIMEOUT_MS;
    this.#drainTimeoutMs = opts.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    this.#reconciliationTimeoutMs = opts.reconciliationTimeoutMs ?? 0;
    this.#done = new Promise((resolve) => this.#resolveDone = resolve);
    const labels = { controller: this.name };
    this.#m = {
      success: reconcileTotal.labels({ ...labels, result: "success" }),
      error: reconcileTotal.labels({ ...labels, result: "error" }),
      requeue: reconcileTotal.labels({ ...labels, result: "requeue" }),
      requeueAfter: reconcileTotal.labels({ ...labels, result: "requeue_after" }),
      errors: reconcileErrors.labels(labels),
      terminal: terminalReconcileErrors.labels(labels),
      panics: reconcilePanics.labels(labels),
      timeouts: reconcileTimeouts.labels(labels),
      time: reconcileTime.labels(labels),
      workers: maxConcurrentReconciles.labels(labels),
      active: activeWorkers.labels(labels),
    };
  }

  /** True from start() on: its queue exists and enqueue() may be called. */
  get started(): boolean {
    return this.#queue !== undefined;
  }

  /** The controller's queue; it exists from start() on (like controller-runtime's NewQueue). */
  get queue(): PriorityQueue {
    if (!this.#queue) throw new Error(`controller ${this.name} is not started`);
    return this.#queue;
  }

  /**
   * Feeds events of informer through predicates (all must pass) into handler and enqueues
   * the requests it returns. Registration happens at start(), so a handler first sees every
   * cached object as a create; watches added after start register immediately.
   */
  watch<T extends KubeObject>(
    informer: Informer<T>,
    handler: Handler<T>,
    ...predicates: Predicate<T>[]
  ): void {
    const filter = and(...predicates);
    const register = () => {
      informer.addEventHandler({
        onAdd: (obj, isInInitialList) =>
          this.#dispatch(
            "create",
            isInInitialList ? LOW_PRIORITY : 0,
            () => filter.create(obj) ? handler.create?.(obj, isInInitialList) : undefined,
          ),
        onUpdate: (oldObj, newObj) =>
          this.#dispatch(
            "update",
            unchanged(oldObj, newObj) ? LOW_PRIORITY : 0,
            () => filter.update(oldObj, newObj) ? handler.update?.(oldObj, newObj) : undefined,
          ),
        onDelete: (obj) =>
          this.#dispatch(
            "delete",
            0,
            () => filter.delete(obj) ? handler.delete?.(obj) : undefined,
          ),
      });
    };
    this.#informers.push(informer as unknown as Informer<KubeObject>);
    if (this.#sourcesStarted) register();
    else this.#pendingWatches.push(register);
  }

  /**
   * Puts a wrapper around the reconciler the workers call (a sharded operator's gate,
   * kube/sharding/gate.ts). Must be called before start(); wrappers stack, the last outermost.
   * `reconciler` still names the unwrapped one.
   */
  wrapReconciler(wrap: (inner: Reconciler) => Reconciler): void {
    if (this.#started) throw new Error(`controller ${this.name}: wrapReconciler after start`);
    this.#wrapped = wrap(this.#wrapped ?? this.reconciler);
  }

  /**
   * Enqueues a request directly (a generic event) at priority 0; requires a started
   * controller.
   */
  enqueue(req: Request): void {
    this.queue.add(keyString(req));
  }

  /**
   * Runs the controller until signal aborts or stop() is called: registers the watches,
   * waits for their informers to sync (rejecting after the cache sync timeout), starts the
   * workers, then drains them. Resolves once stopped; a second start() rejects. When
   * abortSignal aborts, in-flight reconciles have their signals aborted at once and start()
   * returns without draining (controller-runtime skips graceful shutdown on a lost lease).
   */
  async start(signal: AbortSignal, abortSignal?: AbortSignal): Promise<void> {
    if (this.#started) {
      throw new Error(`controller ${this.name} was started more than once`);
    }
    this.#started = true;
    this.#queue = new PriorityQueue({
      name: this.name,
      clock: this.#clock,
      rateLimiter: this.#rateLimiter,
    });
    this.#initMetrics();
    const onAbort = () => this.#requestStop();
    signal.addEventListener("abort", onAbort, { once: true });
    const onHardAbort = () => {
      this.#requestStop();
      this.#hardStop.abort(abortSignal?.reason ?? new Error(`controller ${this.name} aborted`));
    };
    abortSignal?.addEventListener("abort", onHardAbort, { once: true });
    try {
      if (signal.aborted) this.#requestStop();
      if (abortSignal?.aborted) onHardAbort();
      if (this.#stopping) return;
      for (const register of this.#pendingWatches.splice(0)) register();
      this.#sourcesStarted = true;
      if (!(await this.#waitForSync())) return;

      log.info("Starting {workerCount} workers of {controller}", {
        controller: this.name,
        workerCount: this.maxConcurrentReconciles,
      });
      for (let i = 0; i < this.maxConcurrentReconciles; i++) this.#workers.push(this.#worker());
      await new Promise<void>((resolve) => this.#onStop(resolve));
      log.info("Shutdown signal received, waiting for the workers of {controller} to finish", {
        controller: this.name,
        inFlight: this.#inFlight,
      });
      await this.#drainWorkers(abortSignal);
    } finally {
      signal.removeEventListener("abort", onAbort);
      abortSignal?.removeEventListener("abort", onHardAbort);
      this.#requestStop();
      // Also covers stop() having been called before start(): the queue's timers must end.
      this.#queue.shutDown();
      // Anything still running past this point is told to give up.
      this.#hardStop.abort(new Error(`controller ${this.name} stopped`));
      this.#resolveDone();
    }
  }

  /**
   * Stops taking keys and resolves once in-flight reconciles finished (or the drain timeout
   * aborted them). Safe to call before start or more than once.
   */
  stop(): Promise<void> {
    this.#requestStop();
    if (!this.#started) {
      this.#resolveDone();
    }
    return this.#done;
  }

  #dispatch(event: string, priority: number, map: () => Request[] | undefined): void {
    // Handlers run on the informer's dispatch loop: a throwing map function must not break it.
    try {
      const reqs = map();
      if (!reqs || !this.#queue) return;
      for (const req of reqs) this.#queue.addWithOpts({ priority }, keyString(req));
    } catch (err) {
      log.error("Event handler failed for {event} event: {error}", {
        controller: this.name,
        event,
        error: errorMessage(err),
      });
    }
  }

  #requestStop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    // Idle workers wake with "shut down"; busy ones see #stopping when they finish.
    this.#queue?.shutDown();
    for (const wake of this.#stopWaiters) wake();
    this.#stopWaiters.clear();
  }

  #onStop(fn: () => void): () => void {
    if (this.#stopping) {
      fn();
      return () => {};
    }
    this.#stopWaiters.add(fn);
    return () => this.#stopWaiters.delete(fn);
  }

  /** Sleeps ms on the controller's clock, waking early on stop. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: TimerId | undefined = undefined;
      const cancel = this.#onStop(() => {
        if (timer !== undefined) this.#clock.clearTimeout(timer);
        resolve();
      });
      if (this.#stopping) return;
      timer = this.#clock.setTimeout(() => {
        cancel();
        resolve();
      }, ms);
    });
  }

  /** True once all informers synced; false if stopped first; throws on timeout. */
  async #waitForSync(): Promise<boolean> {
    const deadline = this.#clock.now() + this.#cacheSyncTimeoutMs;
    while (!this.#informers.every((i) => i.hasSynced())) {
      if (this.#stopping) return false;
      const left = deadline - this.#clock.now();
      if (left <= 0) {
        const err = new Error(
          `timed out waiting for caches of controller ${this.name} to sync ` +
            `(${this.#cacheSyncTimeoutMs} ms)`,
        );
        log.error("Could not wait for cache to sync: {error}", {
          controller: this.name,
          error: err.message,
        });
        throw err;
      }
      await this.#sleep(Math.min(SYNC_POLL_MS, left));
    }
    return !this.#stopping;
  }

  async #drainWorkers(abortSignal?: AbortSignal): Promise<void> {
    let timer: TimerId | undefined;
    let onAbort = () => {};
    const timedOut = await Promise.race([
      Promise.all(this.#workers).then(() => false),
      new Promise<boolean>((resolve) => {
        timer = this.#clock.setTimeout(() => resolve(true), this.#drainTimeoutMs);
        // Told to stop at once: reconciles were cancelled, do not wait for them.
        onAbort = () => resolve(true);
        if (abortSignal?.aborted) onAbort();
        else abortSignal?.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
    if (timer !== undefined) this.#clock.clearTimeout(timer);
    abortSignal?.removeEventListener("abort", onAbort);
    if (timedOut) {
      log.warn("Drain timeout passed, aborting {inFlight} in-flight reconciles", {
        controller: this.name,
        inFlight: this.#inFlight,
        drainTimeoutMs: this.#drainTimeoutMs,
      });
    } else {
      log.info("All workers of {controller} finished", { controller: this.name });
    }
  }

  async #worker(): Promise<void> {
    const queue = this.queue;
    while (!this.#stopping) {
      const item = await queue.getWithPriority();
      if (item === undefined) return;
      const { key, priority } = item;
      if (this.#stopping) {
        // Shutting down: leave the key; nothing will process it in this process anyway.
        queue.done(key);
        return;
      }
      this.#inFlight++;
      this.#m.active.inc();
      try {
        await this.#reconcileHandler(key, priority);
      } catch (err) {
        // #reconcileHandler catches reconcile errors; this guards the bookkeeping itself.
        log.error("Worker failed handling {key}: {error}", {
          controller: this.name,
          key,
          error: errorMessage(err),
        });
      } finally {
        this.#inFlight--;
        this.#m.active.dec();
        queue.done(key);
      }
    }
  }

  /** Runs one reconcile of key, which was handed out at priority, and files its outcome. */
  async #reconcileHandler(key: string, priority: number): Promise<void> {
    const queue = this.queue;
    const req = parseKey(key);
    const started = this.#clock.now();
    const scope = this.#reconcileSignal();
    let result: Result | void = undefined;
    let error: unknown;
    let failed = false;
    try {
      result = await (this.#wrapped ?? this.reconciler).reconcile(req, scope.signal);
    } catch (err) {
      failed = true;
      error = err;
    } finally {
      scope.dispose();
      if (scope.timedOut()) this.#m.timeouts.inc();
      this.#m.time.observe((this.#clock.now() - started) / 1000);
    }

    const fields = { controller: this.name, namespace: req.namespace, name: req.name };
    if (failed) {
      if (isPanic(error)) {
        this.#m.panics.inc();
        log.error("Observed a panic in reconciler: {error}", {
          ...fields,
          error: errorMessage(error),
          stack: error instanceof Error ? error.stack : undefined,
        });
      }
      if (isTerminalError(error)) {
        this.#m.terminal.inc();
      } else {
        queue.addWithOpts({ rateLimited: true, priority }, key);
      }
      this.#m.errors.inc();
      this.#m.error.inc();
      log.error("Reconciler error in {controller} for {namespace}/{name}: {error}", {
        ...fields,
        error: errorMessage(error),
      });
      return;
    }
    const after = result?.requeueAfter ?? 0;
    const requeuePriority = result?.priority ?? priority;
    if (after > 0) {
      // A requested delay means the object is progressing: start the backoff afresh.
      queue.forget(key);
      queue.addWithOpts({ after, priority: requeuePriority }, key);
      this.#m.requeueAfter.inc();
    } else if (result?.requeue) {
      queue.addWithOpts({ rateLimited: true, priority: requeuePriority }, key);
      this.#m.requeue.inc();
    } else {
      queue.forget(key);
      this.#m.success.inc();
    }
  }

  /**
   * The signal handed to one reconcile: the controller's hard-stop signal, plus a timer when
   * a reconciliation timeout is configured.
   */
  #reconcileSignal(): { signal: AbortSignal; dispose(): void; timedOut(): boolean } {
    const hard = this.#hardStop.signal;
    if (this.#reconciliationTimeoutMs <= 0) {
      return { signal: hard, dispose: () => {}, timedOut: () => false };
    }
    const ac = new AbortController();
    let timedOut = false;
    const onHard = () => ac.abort(hard.reason);
    hard.addEventListener("abort", onHard, { once: true });
    const timer = this.#clock.setTimeout(() => {
      timedOut = true;
      ac.abort(new DOMException("reconciliation timeout", "TimeoutError"));
    }, this.#reconciliationTimeoutMs);
    return {
      signal: ac.signal,
      dispose: () => {
        this.#clock.clearTimeout(timer);
        hard.removeEventListener("abort", onHard);
      },
      timedOut: () => timedOut,
    };
  }

  #initMetrics(): void {
    const m = this.#m;
    for (const c of [m.success, m.error, m.requeue, m.requeueAfter, m.errors, m.terminal]) {
      c.inc(0);
    }
    m.panics.inc(0);
    m.timeouts.inc(0);
    m.workers.set(this.maxConcurrentReconciles);
    m.active.set(0);
  }
}

/**
 * An update that carries no news (same resourceVersion on both sides: a relist replaying an
 * object, or a resync); objects without a resourceVersion compare as "" like in Go.
 */
function unchanged(oldObj: KubeObject, newObj: KubeObject): boolean {
  return (oldObj.metadata.resourceVersion ?? "") === (newObj.metadata.resourceVersion ?? "");
}

/** See the class comment: which thrown values count as panics. */
export function isPanic(err: unknown): boolean {
  if (!(err instanceof Error)) return true;
  if (err instanceof ReferenceError || err instanceof RangeError) return true;
  return err instanceof TypeError && err.cause === undefined;
}
