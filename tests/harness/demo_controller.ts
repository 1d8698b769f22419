/**
 * A small controller built only from kube/ — For a CocoonSet-shaped custom resource, Owns
 * pods — that exercises the runtime end to end before the real reconcilers exist: finalizer,
 * owned-pod create/update/delete, status patch, Events. Used by the manager unit tests on the
 * fake API and by the integration tests as a separate operator process.
 *
 * It is also the model of a reconciler on this runtime: everything it needs comes from
 * kube/mod.ts, finalizer edits carry an optimistic lock (a lost update could drop another
 * controller's finalizer), and every write goes through a merge-from patch that sends nothing
 * when nothing changed.
 *
 * @module
 */
import {
  addFinalizer,
  type Client,
  containsFinalizer,
  controllerManagedBy,
  type EventRecorder,
  generationChanged,
  ignoreNotFound,
  isControlledBy,
  type KubeObject,
  labelChanged,
  type Manager,
  or,
  patchObject,
  patchStatus,
  type Pod,
  Pods,
  type Reconciler,
  removeFinalizer,
  type Request,
  resourceType,
  type Result,
  setControllerReference,
} from "../../kube/mod.ts";

/** The CocoonSet CRD, as far as the demo uses it. */
export interface DemoSet extends KubeObject {
  spec: { agent: { image: string; replicas?: number } };
  status?: { phase?: string; observedGeneration?: number };
}

/** The CocoonSet resource, typed as the demo's shape. */
export const DemoSets = resourceType<DemoSet>({
  group: "cocoonset.cocoonstack.io",
  version: "v1",
  kind: "CocoonSet",
  plural: "cocoonsets",
  namespaced: true,
  statusSubresource: true,
});

/** Holds a set until its pod is gone. */
export const DEMO_FINALIZER = "demo.cocoonstack.io/finalizer";
/** Label on the owned pod naming the process that last reconciled it. */
export const RECONCILED_BY_LABEL = "demo.cocoonstack.io/reconciled-by";
/** Label on the owned pod carrying the replicas the set asked for. */
export const REPLICAS_LABEL = "demo.cocoonstack.io/replicas";

/** The name of the one pod a set owns. */
export function demoPodName(set: string): string {
  return `${set}-demo`;
}

/** Keeps one pod per set, labelled with the set's replicas; cleans it up on deletion. */
export class DemoReconciler implements Reconciler {
  /** How many times reconcile() ran (a standby must never reconcile). */
  reconciles = 0;
  constructor(
    readonly client: Client,
    readonly recorder: EventRecorder,
    readonly identity: string,
  ) {}

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    this.reconciles++;
    const set = await this.client.get(DemoSets, req.namespace, req.name, { signal })
      .catch(ignoreNotFound);
    if (!set) return {};
    if (set.metadata.deletionTimestamp) {
      await this.#finalize(set, signal);
      return {};
    }
    // The finalizer is on the server before anything exists that would need cleaning up.
    if (!containsFinalizer(set, DEMO_FINALIZER)) {
      await patchObject(this.client, DemoSets, set, (s) => addFinalizer(s, DEMO_FINALIZER), {
        optimisticLock: true,
        signal,
      });
      return { requeue: true };
    }
    await this.#ensurePod(set, signal);
    await patchStatus(this.client, DemoSets, set, (s) => {
      s.status = { ...s.status, phase: "Running", observedGeneration: s.metadata.generation };
    }, { signal });
    return {};
  }

  /** The finalizer goes only once the pod's deletion was accepted: no set vanishes leaving its pod. */
  async #finalize(set: DemoSet, signal: AbortSignal): Promise<void> {
    if (!containsFinalizer(set, DEMO_FINALIZER)) return;
    const ns = set.metadata.namespace ?? "";
    await this.client.delete(Pods, ns, demoPodName(set.metadata.name ?? ""), {
      gracePeriodSeconds: 0,
      signal,
    }).catch(ignoreNotFound);
    await patchObject(this.client, DemoSets, set, (s) => removeFinalizer(s, DEMO_FINALIZER), {
      optimisticLock: true,
      signal,
    });
  }

  /** Creates the set's pod, or brings its labels in line; never touches a pod it does not own. */
  async #ensurePod(set: DemoSet, signal: AbortSignal): Promise<void> {
    const ns = set.metadata.namespace ?? "";
    const name = demoPodName(set.metadata.name ?? "");
    const labels = {
      [REPLICAS_LABEL]: String(set.spec.agent.replicas ?? 0),
      [RECONCILED_BY_LABEL]: this.identity,
    };
    const pod = await this.client.get(Pods, ns, name, { signal }).catch(ignoreNotFound);
    if (!pod) {
      const fresh: Pod = {
        metadata: { name, namespace: ns, labels },
        spec: {
          containers: [{ name: "agent", image: set.spec.agent.image }],
          terminationGracePeriodSeconds: 1,
        },
      };
      setControllerReference(set, fresh, DemoSets);
      await this.client.create(Pods, fresh, { signal });
      this.recorder.event(set, "Normal", "PodCreated", `created pod ${name}`);
      return;
    }
    if (!isControlledBy(pod, set)) {
      this.recorder.event(set, "Warning", "PodNotOwned", `pod ${name} exists and is not ours`);
      throw new Error(
        `pod ${ns}/${name} exists and is not controlled by CocoonSet ${ns}/${set.metadata.name}`,
      );
    }
    await patchObject(this.client, Pods, pod, (p) => {
      p.metadata.labels = { ...p.metadata.labels, ...labels };
    }, { signal });
  }
}

/** Wires the demo controller: For the set (generation or label changes), Owns its pods. */
export function setupDemoController(
  mgr: Manager,
  identity: string,
  concurrency = 2,
): DemoReconciler {
  const r = new DemoReconciler(mgr.client, mgr.recorder, identity);
  controllerManagedBy(mgr)
    .named("demo")
    .for(DemoSets, { predicates: [or(generationChanged(), labelChanged())] })
    .owns(Pods)
    .withOptions({ maxConcurrentReconciles: concurrency })
    .complete(r);
  return r;
}
