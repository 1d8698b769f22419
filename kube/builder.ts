import type { Clock } from "./clock.ts";
import { Controller } from "./controller.ts";
import { enqueueForObject, enqueueForOwner, type Handler } from "./handler.ts";
import type { KubeObject } from "./object.ts";
import type { Predicate } from "./predicates.ts";
import type { RateLimiter } from "./rate_limiter.ts";
import type { Reconciler } from "./reconcile.ts";
import type { ResourceType } from "./resource.ts";
import type { Informer } from "./source.ts";

/** Something the manager runs: start resolves when the runnable has stopped. */
export interface Runnable {
  /**
   * signal asks for a graceful stop. abortSignal, when given, asks to stop at once: work in
   * progress is cancelled rather than drained (leadership was lost).
   */
  start(signal: AbortSignal, abortSignal?: AbortSignal): Promise<void>;
  /** Only run on the elected leader; the manager treats absent as true for controllers. */
  needLeaderElection?: boolean;
}

/**
 * What the builder needs from the manager (kube/manager.ts implements it): shared informers
 * per resource type and a place to register the controller so it starts with the manager.
 */
export interface ControllerHost {
  informerFor<T extends KubeObject>(rt: ResourceType<T>): Informer<T>;
  add(runnable: Runnable): void;
}

/** Per-watch options. */
export interface WatchOptions<T extends KubeObject> {
  /** All must pass for an event to be handled (after the global event filters). */
  predicates?: Predicate<T>[];
}

/** Options of owns(). */
export interface OwnsOptions<T extends KubeObject> extends WatchOptions<T> {
  /** Follow every owner reference of the For kind, not only the controller one. */
  matchEveryOwner?: boolean;
}

/** Controller settings settable through withOptions(). */
export interface BuilderControllerOptions {
  maxConcurrentReconciles?: number;
  cacheSyncTimeoutMs?: number;
  drainTimeoutMs?: number;
  reconciliationTimeoutMs?: number;
  rateLimiter?: RateLimiter;
  /** false: the plain client-go queue instead of the priority queue (default true). */
  usePriorityQueue?: boolean;
  needLeaderElection?: boolean;
  clock?: Clock;
}

type Wiring = (ctrl: Controller, global: Predicate<KubeObject>[]) => void;

/**
 * Fluent wiring of a controller, read like controller-runtime's builder:
 * `controllerManagedBy(mgr).for(CocoonSets).owns(Pods).withOptions({...}).complete(r)`.
 */
export class Builder {
  readonly #host: ControllerHost;
  #name = "";
  #forType: ResourceType<KubeObject> | undefined;
  #wirings: Wiring[] = [];
  #ownsCount = 0;
  #global: Predicate<KubeObject>[] = [];
  #options: BuilderControllerOptions = {};

  constructor(host: ControllerHost) {
    this.#host = host;
  }

  /** Sets the controller name (metrics, logs); defaults to the lower-cased For kind. */
  named(name: string): this {
    this.#name = name;
    return this;
  }

  /** The reconciled kind: its own events enqueue its own key. Call once. */
  for<T extends KubeObject>(rt: ResourceType<T>, opts: WatchOptions<T> = {}): this {
    if (this.#forType) {
      throw new Error("for() already called; use watches() for additional kinds");
    }
    this.#forType = rt as unknown as ResourceType<KubeObject>;
    return this.#addWatch(rt, enqueueForObject<T>(), opts.predicates ?? []);
  }

  /**
   * A kind created and controlled by the For kind: its events enqueue the owner named by the
   * controller owner reference (kind and API group of the For type).
   */
  owns<T extends KubeObject>(rt: ResourceType<T>, opts: OwnsOptions<T> = {}): this {
    this.#ownsCount++;
    const informer = () => this.#host.informerFor(rt);
    const predicates = opts.predicates ?? [];
    this.#wirings.push((ctrl, global) => {
      const owner = this.#forType!;
      const handler = enqueueForOwner<T>(owner, { onlyController: !opts.matchEveryOwner });
      ctrl.watch(informer(), handler, ...(global as Predicate<T>[]), ...predicates);
    });
    return this;
  }

  /** Any other kind, mapped to requests by handler (e.g. enqueueFromMap). */
  watches<T extends KubeObject>(
    rt: ResourceType<T>,
    handler: Handler<T>,
    opts: WatchOptions<T> = {},
  ): this {
    return this.#addWatch(rt, handler, opts.predicates ?? []);
  }

  /** Predicates applied to every watch of this controller (WithEventFilter). */
  withEventFilter(p: Predicate<KubeObject>): this {
    this.#global.push(p);
    return this;
  }

  withOptions(opts: BuilderControllerOptions): this {
    this.#options = { ...this.#options, ...opts };
    return this;
  }

  /** Creates the controller, wires its watches and registers it with the host. */
  build(reconciler: Reconciler): Controller {
    if (this.#ownsCount > 0 && !this.#forType) {
      throw new Error("owns() can only be used together with for()");
    }
    if (this.#wirings.length === 0) {
      throw new Error(
        "there are no watches configured, controller will never get triggered; " +
          "use for(), owns() or watches()",
      );
    }
    const name = this.#name || this.#forType?.kind.toLowerCase();
    if (!name) throw new Error("one of for() or named() must be called");
    const ctrl = new Controller({ name, reconciler, ...this.#options });
    for (const wire of this.#wirings) wire(ctrl, this.#global);
    this.#host.add(ctrl);
    return ctrl;
  }

  /** build() without the result, as controller-runtime's Complete. */
  complete(reconciler: Reconciler): void {
    this.build(reconciler);
  }

  #addWatch<T extends KubeObject>(
    rt: ResourceType<T>,
    handler: Handler<T>,
    predicates: Predicate<T>[],
  ): this {
    this.#wirings.push((ctrl, global) => {
      ctrl.watch(this.#host.informerFor(rt), handler, ...(global as Predicate<T>[]), ...predicates);
    });
    return this;
  }
}

/** Starts wiring a controller managed by host (NewControllerManagedBy). */
export function controllerManagedBy(host: ControllerHost): Builder {
  return new Builder(host);
}
