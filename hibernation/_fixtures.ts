/**
 * Fixtures of the hibernation unit tests: requests, VM pods as vk-cocoon leaves them, and a
 * harness wiring the reconciler to the fake API, a fake registry, a real Event recorder writing
 * into the fake API, and a fake clock. Test-only; production code never imports it.
 *
 * @module
 */
import {
  type CocoonHibernation,
  CocoonHibernations,
  type CocoonHibernationStatus,
  type HibernationDesire,
} from "../common/apis/v1/mod.ts";
import {
  type Condition,
  CONDITION_TYPE_READY,
  findStatusCondition,
} from "../common/k8s/condition.ts";
import { applyHibernateState } from "../common/meta/hibernate.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VM_NAME,
  ANNOTATION_VMID,
} from "../common/meta/keys.ts";
import { Events, Pods, Recorder, rfc3339 } from "../kube/mod.ts";
import type { Client, CoreEvent, KubeObject, Pod, Reader, Result } from "../kube/mod.ts";
import { FakeClient, FakeClock, metricValue } from "../kube/testing/mod.ts";
import { register as registerOperatorMetrics } from "../metrics/metrics.ts";
import { FakeRegistry } from "../snapshot/testing/fake.ts";
import { HIBERNATION_FINALIZER } from "./finalizer.ts";
import { HibernationReconciler } from "./reconciler.ts";

export const NS = "ns";
export const POD = "demo-0";
export const VM = "vk-ns-demo-0";
/** vk-cocoon's lifecycle pair of a hibernated VM at the pods' (zero) generation stamp. */
export const HIBERNATED_LIFECYCLE = { state: "hibernated", observedGeneration: 0 };

/** The Ready condition of a status. */
export function readyOf(
  status: { conditions?: Parameters<typeof findStatusCondition>[0] } | undefined,
): Condition | undefined {
  return findStatusCondition(status?.conditions, CONDITION_TYPE_READY);
}

/** Observations so far of a phase-duration histogram with result. */
export async function histogramCount(
  family: "hibernate" | "wake",
  result: string,
): Promise<number> {
  return await metricValue(`cocoon_operator_${family}_phase_duration_seconds_count`, { result }) ??
    0;
}

/** The fake clock's start: every timestamp in these tests is relative to it. */
export const T0 = Date.parse("2026-03-02T10:00:00Z");

/** A timestamp ms after T0 (negative = before), as the API writes it. */
export function at(ms: number): string {
  return rfc3339(T0 + ms);
}

/** Options of {@link request}. */
export interface RequestOptions {
  pod?: string;
  status?: CocoonHibernationStatus;
  /** Default: the reconciler's finalizer is already there. */
  finalizers?: string[];
  generation?: number;
  created?: string;
  uid?: string;
  deleting?: boolean;
}

/** A CocoonHibernation in NS. */
export function request(
  name: string,
  desire: HibernationDesire | string,
  opts: RequestOptions = {},
): CocoonHibernation {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: {
      name,
      namespace: NS,
      finalizers: opts.finalizers ?? [HIBERNATION_FINALIZER],
      ...(opts.generation !== undefined ? { generation: opts.generation } : {}),
      ...(opts.created ? { creationTimestamp: opts.created } : {}),
      ...(opts.uid ? { uid: opts.uid } : {}),
      ...(opts.deleting ? { deletionTimestamp: at(0) } : {}),
    },
    spec: { podRef: { name: opts.pod ?? POD }, desire: desire as HibernationDesire },
    ...(opts.status ? { status: opts.status } : {}),
  };
}

/** A Ready condition entered at the given time. */
export function ready(
  status: "True" | "False",
  reason: string,
  lastTransitionTime: string,
  message = "",
): Condition {
  return { type: "Ready", status, reason, message, lastTransitionTime };
}

/** How vk-cocoon has left a VM pod. */
export interface PodOptions {
  name?: string;
  /** null: no VM name annotation yet. */
  vmName?: string | null;
  hibernate?: boolean;
  lifecycle?: { state: string; observedGeneration?: number };
  /** The CocoonSet generation stamp on the pod. */
  stamp?: number;
  vmID?: string;
  running?: boolean;
  labels?: Record<string, string>;
}

/** A pod in NS carrying the VM annotations vk-cocoon writes. */
export function vmPod(opts: PodOptions = {}): Pod {
  const annotations: Record<string, string> = {};
  const vmName = opts.vmName === undefined ? VM : opts.vmName;
  if (vmName !== null) annotations[ANNOTATION_VM_NAME] = vmName;
  if (opts.lifecycle) {
    annotations[ANNOTATION_LIFECYCLE_STATE] = opts.lifecycle.state;
    if (opts.lifecycle.observedGeneration !== undefined) {
      annotations[ANNOTATION_LIFECYCLE_OBSERVED_GENERATION] = String(
        opts.lifecycle.observedGeneration,
      );
    }
  }
  if (opts.stamp !== undefined) annotations[ANNOTATION_COCOON_SET_GENERATION] = String(opts.stamp);
  if (opts.vmID) annotations[ANNOTATION_VMID] = opts.vmID;
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: opts.name ?? POD,
      namespace: NS,
      annotations,
      ...(opts.labels ? { labels: opts.labels } : {}),
    },
    spec: { containers: [{ name: "agent", image: "placeholder" }] },
    status: {
      phase: opts.running ? "Running" : "Pending",
      ...(opts.running
        ? {
          containerStatuses: [{
            name: "agent",
            ready: true,
            restartCount: 0,
            image: "placeholder",
            imageID: "",
            state: { running: { startedAt: at(0) } },
          }],
        }
        : {}),
    },
  };
  if (opts.hibernate) applyHibernateState(true, pod);
  return pod;
}

/** Options of {@link Harness.create}. */
export interface HarnessOptions {
  registry?: FakeRegistry;
  /** Wraps the fake API as the reconciler's cached client (e.g. to serve stale copies). */
  cachedClient?: (api: FakeClient) => Client;
  /** Wraps the fake API as the reconciler's uncached reader. */
  apiReader?: (api: FakeClient) => Reader;
}

/** The reconciler on the fake API, fake registry and fake clock. */
export class Harness {
  private constructor(
    readonly api: FakeClient,
    readonly registry: FakeRegistry,
    readonly recorder: Recorder,
    readonly clock: FakeClock,
    readonly reconciler: HibernationReconciler,
  ) {}

  /** Seeds objects (CocoonHibernations and Pods) and builds the reconciler. */
  static create(objects: KubeObject[], opts: HarnessOptions = {}): Harness {
    registerOperatorMetrics();
    const clock = new FakeClock(T0);
    const api = new FakeClient({ clock });
    for (const obj of objects) {
      if (obj.kind === "Pod") api.seed(Pods, obj as Pod);
      else api.seed(CocoonHibernations, obj as CocoonHibernation);
    }
    const registry = opts.registry ?? new FakeRegistry();
    const recorder = new Recorder({ client: api, component: "cocoon-operator" });
    const reconciler = new HibernationReconciler({
      client: opts.cachedClient ? opts.cachedClient(api) : api,
      apiReader: opts.apiReader ? opts.apiReader(api) : api,
      registry,
      recorder,
      clock,
    });
    return new Harness(api, registry, recorder, clock, reconciler);
  }

  /** One reconcile of the named request. */
  async reconcile(name: string, signal = new AbortController().signal): Promise<Result> {
    return await this.reconciler.reconcile({ namespace: NS, name }, signal);
  }

  hib(name: string): Promise<CocoonHibernation> {
    return this.api.get(CocoonHibernations, NS, name);
  }

  pod(name = POD): Promise<Pod> {
    return this.api.get(Pods, NS, name);
  }

  /** Whether the named request is gone from the API. */
  async gone(name: string): Promise<boolean> {
    try {
      await this.hib(name);
      return false;
    } catch {
      return true;
    }
  }

  /** Events written so far (after flushing the recorder). */
  async events(): Promise<CoreEvent[]> {
    await this.recorder.flush();
    return (await this.api.list(Events, { namespace: NS })).items;
  }

  /** Reasons of the Events about the named request, in writing order. */
  async reasons(name: string): Promise<string[]> {
    return (await this.events())
      .filter((e) => e.involvedObject.name === name)
      .flatMap((e) => Array(e.count ?? 1).fill(e.reason ?? ""));
  }

  /** API writes (create, update, patch, delete) made so far, by resource plural. */
  writes(plural?: string): number {
    return this.api.actions.filter((a) =>
      a.verb !== "get" && a.verb !== "list" && a.verb !== "watch" &&
      (plural === undefined || a.resource.plural === plural)
    ).length;
  }

  async close(): Promise<void> {
    await this.recorder.close(1_000);
  }
}
