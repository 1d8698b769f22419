/**
 * A small controller built only from kube/ — For a CocoonSet-shaped custom resource, Owns
 * pods — that exercises the runtime end to end before the real reconcilers exist: finalizer,
 * owned-pod create/update/delete, status patch, Events. Used by the manager unit tests on the
 * fake API and by the integration tests as a separate operator process.
 */
import { controllerManagedBy } from "../../kube/builder.ts";
import type { Client } from "../../kube/client.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import type { EventRecorder } from "../../kube/events.ts";
import type { Manager } from "../../kube/manager.ts";
import type { KubeObject } from "../../kube/object.ts";
import { generationChanged, labelChanged, or } from "../../kube/predicates.ts";
import type { Reconciler, Request, Result } from "../../kube/reconcile.ts";
import { resourceType } from "../../kube/resource.ts";

/** The CocoonSet CRD, as far as the demo uses it. */
export interface DemoSet extends KubeObject {
  spec: { agent: { image: string; replicas?: number } };
  status?: { phase?: string; observedGeneration?: number };
}

export const DemoSets = resourceType<DemoSet>({
  group: "cocoonset.cocoonstack.io",
  version: "v1",
  kind: "CocoonSet",
  plural: "cocoonsets",
  namespaced: true,
  statusSubresource: true,
});

export const demoFinalizer = "demo.cocoonstack.io/finalizer";
/** Label on the owned pod naming the process that last reconciled it. */
export const reconciledByLabel = "demo.cocoonstack.io/reconciled-by";
/** Label on the owned pod carrying the replicas the set asked for. */
export const replicasLabel = "demo.cocoonstack.io/replicas";

export function demoPodName(set: string): string {
  return `${set}-demo`;
}

/** Keeps one pod per set, labelled with the set's replicas; cleans it up on deletion. */
export class DemoReconciler implements Reconciler {
  reconciles = 0;
  constructor(
    readonly client: Client,
    readonly recorder: EventRecorder,
    readonly identity: string,
  ) {}

  async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
    this.reconciles++;
    let set: DemoSet;
    try {
      set = await this.client.get(DemoSets, req.namespace, req.name, { signal });
    } catch (err) {
      if (isNotFound(err)) return {};
      throw err;
    }
    const podName = demoPodName(req.name);
    if (set.metadata.deletionTimestamp) {
      try {
        await this.client.delete(Pods, req.namespace, podName, { gracePeriodSeconds: 0, signal });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      const finalizers = (set.metadata.finalizers ?? []).filter((f) => f !== demoFinalizer);
      await this.client.patch(DemoSets, req.namespace, req.name, "merge", {
        metadata: { finalizers, resourceVersion: set.metadata.resourceVersion },
      }, { signal });
      return {};
    }
    if (!set.metadata.finalizers?.includes(demoFinalizer)) {
      await this.client.patch(DemoSets, req.namespace, req.name, "merge", {
        metadata: {
          finalizers: [...(set.metadata.finalizers ?? []), demoFinalizer],
          resourceVersion: set.metadata.resourceVersion,
        },
      }, { signal });
      return { requeue: true };
    }
    const replicas = String(set.spec.agent.replicas ?? 0);
    let pod: Pod | undefined;
    try {
      pod = await this.client.get(Pods, req.namespace, podName, { signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!pod) {
      await this.client.create(Pods, {
        metadata: {
          name: podName,
          namespace: req.namespace,
          labels: { [replicasLabel]: replicas, [reconciledByLabel]: this.identity },
          ownerReferences: [{
            apiVersion: "cocoonset.cocoonstack.io/v1",
            kind: "CocoonSet",
            name: req.name,
            uid: set.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          }],
        },
        spec: {
          containers: [{ name: "agent", image: set.spec.agent.image }],
          terminationGracePeriodSeconds: 1,
        },
      }, { signal });
      this.recorder.event(set, "Normal", "PodCreated", `created pod ${podName}`);
    } else if (
      pod.metadata.labels?.[replicasLabel] !== replicas ||
      pod.metadata.labels?.[reconciledByLabel] !== this.identity
    ) {
      await this.client.patch(Pods, req.namespace, podName, "merge", {
        metadata: { labels: { [replicasLabel]: replicas, [reconciledByLabel]: this.identity } },
      }, { signal });
    }
    if (set.status?.observedGeneration !== set.metadata.generation) {
      await this.client.patch(DemoSets, req.namespace, req.name, "merge", {
        status: { phase: "Running", observedGeneration: set.metadata.generation },
      }, { subresource: "status", signal });
    }
    return {};
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
