/**
 * The controller builder (controller-runtime pkg/builder): wiring that reads like a sentence,
 * For the reconciled kind, Owns the kinds it creates, Watches anything else.
 *
 * @module
 */
import { Controller, type ControllerOptions } from "./controller.ts";
import { enqueueForObject, enqueueForOwner, type Handler } from "./handler.ts";
import type { KubeObject } from "./object.ts";
import type { Predicate } from "./predicates.ts";
import type { Reconciler } from "./reconcile.ts";
import type { ResourceType } from "./resource.ts";
import type { Runnable } from "./runnable.ts";
import type { Informer } from "./source.ts";

/**
 * What the builder needs from the manager (kube/manager.ts implements it): shared informers
 * per resource type and a place to register the controller so it starts with the manager.
 */
export interface ControllerHost {
  /** The shared informer of rt (created on first use, started with the host). */
  informerFor<T extends KubeObject>(rt: ResourceType<T>): Informer<T>;
  /** Registers a runnable to start and stop with the host. */
  add(runnable: Runnable): void;
}

/** Options of for() and watches() (the client's WatchOptions are a watch request's). */
export interface BuilderWatchOptions<T extends KubeObject> {
  /**
   * All must pass for an event to be handled, after the controller's withEventFilter
   * predicates. A predicate lacking a method lets that event type through.
   */
  predicates?: Predicate<T>[];
}

/** Options of owns(). */
export interface OwnsOptions<T extends KubeObject> extends BuilderWatchOptions<T> {
  /**
   * Follow every owner reference of the For kind, not only the controller one
   * (MatchEveryOwner). Default false: only the `controller: true` reference enqueues.
   */
  matchEveryOwner?: boolean;
}

/**
 * Controller settings settable through withOptions() (controller.Options): the controller's own
 * options, less the two the builder fills in itself. Durations in ms.
 */
export type BuilderControllerOptions = Omit<ControllerOptions, "name" | "reconciler">;

type Wiring = (ctrl: Controller, global: Predicate<KubeObject>[]) => void;

/**
 * Fluent wiring of a controller, read like controller-runtime's builder. Nothing is wired until
 * build() / complete(); the watches then start with the host. See {@link controllerManagedBy}.
 */
export class Builder {
  readonly #host: ControllerHost;
  #name = "";
  #forType: ResourceType<KubeObject> | undefined;
  #wirings: Wiring[] = [];
  #ownsCount = 0;
  #global: Predicate<KubeObject>[] = [];
  #options: BuilderControllerOptions = {};

  /** Prefer {@link controllerManagedBy}. */
  constructor(host: ControllerHost) {
    this.#host = host;
  }

  /** Sets the controller name (metrics, logs); defaults to the lower-cased For kind. */
  named(name: string): this {
    this.#name = name;
    return this;
  }

  /** The reconciled kind: its own events enqueue its own key. Call once. */
  for<T extends KubeObject>(rt: ResourceType<T>, opts: BuilderWatchOptions<T> = {}): this {
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
    opts: BuilderWatchOptions<T> = {},
  ): this {
    return this.#addWatch(rt, handler, opts.predicates ?? []);
  }

  /** Predicates applied to every watch of this controller (WithEventFilter). */
  withEventFilter(p: Predicate<KubeObject>): this {
    this.#global.push(p);
    return this;
  }

  /** Sets controller options; later calls override earlier ones field by field. */
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

/**
 * Starts wiring a controller managed by host (NewControllerManagedBy); host is usually the
 * manager. `for()` names the reconciled kind, `owns()` the kinds it creates (their events
 * enqueue the owner), `withOptions()` sets the controller's options, and `complete()` registers
 * the controller, which starts with the manager.
 *
 * @example A CocoonSet controller that owns pods
 * ```ts
 * import {
 *   controllerManagedBy,
 *   generationChanged,
 *   Manager,
 *   Pods,
 *   type Reconciler,
 *   resourceType,
 * } from "./mod.ts";
 * import { FakeClient } from "./testing/mod.ts";
 *
 * const CocoonSets = resourceType({
 *   group: "cocoonset.cocoonstack.io",
 *   version: "v1",
 *   kind: "CocoonSet",
 *   plural: "cocoonsets",
 *   namespaced: true,
 *   statusSubresource: true,
 * });
 * const mgr = new Manager({
 *   client: new FakeClient(),
 *   metricsBindAddress: "0",
 *   healthProbeBindAddress: "0",
 *   leaderElection: false,
 *   leaderElectionId: "example",
 * });
 * const r: Reconciler = { reconcile: () => Promise.resolve({}) };
 *
 * controllerManagedBy(mgr)
 *   .for(CocoonSets, { predicates: [generationChanged()] })
 *   .owns(Pods)
 *   .withOptions({ maxConcurrentReconciles: 4 })
 *   .complete(r);
 * ```
 */
export function controllerManagedBy(host: ControllerHost): Builder {
  return new Builder(host);
}
