/**
 * The simulated kube-scheduler for the simulator's virtual nodes. It binds pending pods that
 * tolerate the vk-cocoon taint, honouring nodeSelector, node affinity (required and preferred)
 * and the nodes' pod capacity (sim/placement.ts decides), through the pods/binding subresource
 * like the real scheduler. A pod that fits nowhere gets PodScheduled=False / Unschedulable with
 * the real scheduler's message, and is tried again whenever a seat is freed or a node changes.
 *
 * Like kube-scheduler, decisions are made one pod at a time while bindings run concurrently:
 * a decision takes the seat at once (assumed), and a failed binding gives it back. Pods created
 * with spec.nodeName (sub-agents) never reach it; pods that do not tolerate the taint, name
 * another scheduler, or are being deleted are left alone.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "../kube/client.ts";
import type { Clock } from "../kube/clock.ts";
import { type Binding, type Node, type Pod, type PodCondition, Pods } from "../kube/core.ts";
import { errorMessage, isConflict, isNotFound } from "../kube/errors.ts";
import type { SharedInformer } from "../kube/informer.ts";
import { keyString, objectKey, parseKey } from "../kube/object.ts";
import { ItemExponentialFailureRateLimiter } from "../kube/rate_limiter.ts";
import { rfc3339 } from "../kube/time.ts";
import { PriorityQueue } from "../kube/priority_queue.ts";
import type { SimCounters, SimEvent } from "./events.ts";
import { nodeView, PROVIDER_TAINT } from "./nodes.ts";
import { place, tolerates } from "./placement.ts";
import { SeatLedger } from "./seats.ts";

const log = getLogger(["cocoon-operator", "sim", "scheduler"]);

const DEFAULT_SCHEDULER = "default-scheduler";

/** What the scheduler needs from the simulator. */
export interface SchedulerOptions {
  client: Client;
  pods: SharedInformer<Pod>;
  nodes: SharedInformer<Node>;
  /** Names of the nodes this simulator runs; the only candidates. May grow while running. */
  ownNodes: ReadonlySet<string>;
  clock: Clock;
  counters: SimCounters;
  emit: (ev: Omit<SimEvent, "at">) => void;
}

/** Whether a phase means the pod's containers are done for good (its seat is free). */
function isTerminated(pod: Pod): boolean {
  return pod.status?.phase === "Failed" || pod.status?.phase === "Succeeded";
}

/** Whether this scheduler should place the pod. */
function needsScheduling(pod: Pod): boolean {
  const spec = pod.spec;
  if (!spec || spec.nodeName || pod.metadata.deletionTimestamp || isTerminated(pod)) return false;
  if (spec.schedulerName && spec.schedulerName !== DEFAULT_SCHEDULER) return false;
  return tolerates(spec.tolerations, PROVIDER_TAINT);
}

/** The Binding that assigns pod to node; the pod's uid guards against a re-created namesake. */
function bindingFor(pod: Pod, node: string): Binding {
  return {
    apiVersion: "v1",
    kind: "Binding",
    metadata: {
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      ...(pod.metadata.uid ? { uid: pod.metadata.uid } : {}),
    },
    target: { apiVersion: "v1", kind: "Node", name: node },
  };
}

/** The simulated scheduler; see the module doc. */
export class Scheduler {
  readonly #opts: SchedulerOptions;
  readonly #queue: PriorityQueue;
  readonly #ledger = new SeatLedger();
  /** Pods that fit nowhere at their last attempt; retried when capacity appears. */
  readonly #waiting = new Set<string>();
  readonly #binding = new Map<string, Promise<void>>();
  #stopping = false;

  constructor(opts: SchedulerOptions) {
    this.#opts = opts;
    this.#queue = new PriorityQueue({
      clock: opts.clock,
      rateLimiter: new ItemExponentialFailureRateLimiter(10, 5_000),
    });
    opts.pods.addEventHandler({
      onAdd: (pod) => this.#observe(pod),
      onUpdate: (_old, pod) => this.#observe(pod),
      onDelete: (pod) => {
        const key = keyString(objectKey(pod));
        this.#waiting.delete(key);
        if (this.#ledger.forget(key)) this.#retryWaiting();
      },
    });
    const onNode = (node: Node) => {
      if (opts.ownNodes.has(node.metadata.name ?? "")) this.#retryWaiting();
    };
    opts.nodes.addEventHandler({
      onAdd: onNode,
      onUpdate: (_old, node) => onNode(node),
      onDelete: onNode,
    });
  }

  /** Seats taken on a node (bound or being bound, terminating included). */
  used(node: string): number {
    return this.#ledger.used(node);
  }

  /** Makes decisions until stop(); bindings it started may still be running when it returns. */
  async run(): Promise<void> {
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      try {
        if (!this.#stopping) await this.#schedule(key);
        this.#queue.forget(key);
      } catch (err) {
        this.#opts.counters.retries++;
        log.warn("scheduling {pod} failed, retrying: {error}", {
          pod: key,
          error: errorMessage(err),
        });
        this.#queue.addRateLimited(key);
      } finally {
        this.#queue.done(key);
      }
    }
  }

  /** Stops taking pods and waits for the bindings in flight. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#queue.shutDown();
    await Promise.allSettled([...this.#binding.values()]);
  }

  #observe(pod: Pod): void {
    const key = keyString(objectKey(pod));
    const node = pod.spec?.nodeName && !isTerminated(pod) ? pod.spec.nodeName : undefined;
    if (this.#ledger.observe(key, node)) this.#retryWaiting();
    if (needsScheduling(pod)) this.#queue.add(key);
    else this.#waiting.delete(key);
  }

  /** Tries the waiting pods again (a node joined or changed). */
  retry(): void {
    this.#retryWaiting();
  }

  #retryWaiting(): void {
    for (const key of this.#waiting) this.#queue.add(key);
  }

  async #schedule(key: string): Promise<void> {
    if (this.#binding.has(key)) return;
    const { namespace, name } = parseKey(key);
    const pod = this.#opts.pods.getStored(namespace, name);
    if (!pod || !needsScheduling(pod)) {
      this.#waiting.delete(key);
      return;
    }
    const candidates: Node[] = [];
    for (const nodeName of this.#opts.ownNodes) {
      const node = this.#opts.nodes.getStored("", nodeName);
      if (node) candidates.push(node);
    }
    const placement = place(
      pod,
      candidates.map((n) => nodeView(n, this.#ledger.used(n.metadata.name ?? ""))),
    );
    if ("node" in placement) {
      this.#waiting.delete(key);
      this.#ledger.assume(key, placement.node);
      const binding = this.#bind(key, pod, placement.node)
        .finally(() => this.#binding.delete(key));
      this.#binding.set(key, binding);
      return;
    }
    this.#waiting.add(key);
    await this.#markUnschedulable(pod, placement.unschedulable);
  }

  async #bind(key: string, pod: Pod, node: string): Promise<void> {
    const { client, counters, emit } = this.#opts;
    const { namespace, name } = objectKey(pod);
    try {
      await client.createSubresource(Pods, namespace, name, "binding", bindingFor(pod, node));
      counters.bound++;
      emit({ type: "bound", namespace, name, node });
      log.debug("bound {pod} to {node}", { pod: key, node });
    } catch (err) {
      if (this.#ledger.unassume(key)) this.#retryWaiting();
      // Conflict: bound meanwhile (or being deleted); NotFound: gone. Either way nothing to do.
      if (isConflict(err) || isNotFound(err)) {
        log.debug("binding {pod} skipped: {error}", { pod: key, error: errorMessage(err) });
        return;
      }
      counters.retries++;
      log.warn("binding {pod} to {node} failed, retrying: {error}", {
        pod: key,
        node,
        error: errorMessage(err),
      });
      this.#queue.addRateLimited(key);
    }
  }

  /** Writes PodScheduled=False / Unschedulable unless the pod already says exactly that. */
  async #markUnschedulable(pod: Pod, message: string): Promise<void> {
    const { client, counters, emit, clock } = this.#opts;
    const { namespace, name } = objectKey(pod);
    const current = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
    if (
      current?.status === "False" && current.reason === "Unschedulable" &&
      current.message === message
    ) {
      return;
    }
    const condition: PodCondition = {
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message,
      lastTransitionTime: current?.status === "False" && current.lastTransitionTime
        ? current.lastTransitionTime
        : rfc3339(clock.now()),
    };
    const others = (pod.status?.conditions ?? []).filter((c) => c.type !== "PodScheduled");
    try {
      await client.patch(Pods, namespace, name, "merge", {
        status: { conditions: [...others, condition] },
      }, { subresource: "status" });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    counters.unschedulable++;
    emit({ type: "unschedulable", namespace, name, detail: message });
    log.info("{pod} is unschedulable: {message}", { pod: `${namespace}/${name}`, message });
  }
}
