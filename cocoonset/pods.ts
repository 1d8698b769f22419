/**
 * A CocoonSet's pods: which it owns (the List step), their roles, and how they are built from the
 * spec, always as fresh objects that share nothing with the set or each other.
 */
import {
  type Affinity,
  deepCopy,
  isControlledBy,
  isValidLabelValue,
  type NodeSelectorTerm,
  type Pod,
  Pods,
  type Reader,
  type ResourceRequirements,
  setControllerReference,
} from "../kube/mod.ts";
import type {
  CocoonSet,
  QuantityValue,
  ToolboxSpec,
  VMResourceRequirements,
} from "../common/apis/v1/cocoonset_types.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  applyVMRuntime,
  applyVMSpec,
  DEFAULT_NODE_POOL,
  fromAgentSpec,
  fromToolboxSpec,
  isPodPhaseFailed,
  LABEL_COCOON_SET,
  LABEL_NODE_POOL,
  LABEL_ROLE,
  LABEL_SLOT,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  LIFECYCLE_STATE_FAILED,
  readLifecycleState,
  ROLE_MAIN,
  ROLE_SUB_AGENT,
  ROLE_TOOLBOX,
  TOLERATION_KEY,
  vmNameForDeployment,
  vmNameForPod,
} from "../common/meta/mod.ts";
import { TOOLBOX_MODE_STATIC } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { canonicalResourceList, parseQuantity } from "../common/k8s/quantity.ts";
import { parseGoInt } from "../common/meta/annotations.ts";

/** The image of every pod's one container: never pulled (vk-cocoon runs a VM instead). */
const PLACEHOLDER_IMAGE = "ghcr.io/cocoonstack/placeholder:latest";
/** Node label the hostname affinities select on. */
export const LABEL_HOSTNAME = "kubernetes.io/hostname";

/** The owned pods of a set, grouped by role. Pods being deleted are left out entirely. */
export interface ClassifiedPods {
  main?: Pod;
  /** Sub-agents by slot number. */
  sub: Map<number, Pod>;
  /** Toolbox pods by toolbox name (their slot label). */
  toolbox: Map<string, Pod>;
  /** Every owned, non-terminating pod by name, including pods with an unknown role. */
  allByName: Map<string, Pod>;
}

/** allByName's pods in name order: the order every per-pod write follows. */
export function podsByName(c: ClassifiedPods): Pod[] {
  return [...c.allByName.keys()].sort().map((name) => c.allByName.get(name)!);
}

/** Groups pods by role, terminating ones left out; an unknown role or slot is only in allByName. */
export function classifyPods(pods: readonly Pod[]): ClassifiedPods {
  const out: ClassifiedPods = { sub: new Map(), toolbox: new Map(), allByName: new Map() };
  for (const pod of pods) {
    if (pod.metadata.deletionTimestamp) continue;
    const name = pod.metadata.name ?? "";
    out.allByName.set(name, pod);
    const role = pod.metadata.labels?.[LABEL_ROLE];
    const slot = pod.metadata.labels?.[LABEL_SLOT] ?? "";
    const n = role === ROLE_SUB_AGENT ? parseGoInt(slot, 32) : undefined;
    if (role === ROLE_MAIN) out.main = pod;
    else if (role === ROLE_TOOLBOX) out.toolbox.set(slot, pod);
    else if (n !== undefined) out.sub.set(n, pod);
  }
  return out;
}

/** The pod name of a toolbox. */
export function toolboxPodName(csName: string, tbName: string): string {
  return `${csName}-${tbName}`;
}

/**
 * The desired pod of an agent slot: slot 0 is the main (pinned by spec.nodeName's required
 * affinity); slots ≥ 1 fork from mainVMName, bound to bindNodeName.
 */
export function buildAgentPod(
  cs: CocoonSet,
  slot: number,
  mainVMName = "",
  bindNodeName = "",
): Pod {
  const agent = cs.spec.agent;
  const isMain = slot === 0;
  const podName = `${cs.metadata.name ?? ""}-${slot}`;
  const pod = newManagedPod(cs, podName, isMain ? ROLE_MAIN : ROLE_SUB_AGENT, String(slot));
  const vmName = vmNameForDeployment(cs.metadata.namespace ?? "", cs.metadata.name ?? "", slot);
  applyVMSpec(
    fromAgentSpec(agent, vmName, cs.spec.snapshotPolicy, isMain ? "" : mainVMName),
    pod,
  );
  const container = pod.spec!.containers[0];
  container.resources = podResources(agent.resources, agent.storage);
  if (agent.envFrom && agent.envFrom.length > 0) container.envFrom = deepCopy(agent.envFrom);
  if (agent.serviceAccountName) pod.spec!.serviceAccountName = agent.serviceAccountName;
  if (bindNodeName) {
    pod.spec!.nodeName = bindNodeName;
  } else if (isMain && cs.spec.nodeName) {
    pod.spec!.affinity = hostnameAffinity("required", cs.spec.nodeName);
  }
  return pod;
}

/** The desired pod of a toolbox. Static toolboxes carry the runtime facts of their existing VM. */
export function buildToolboxPod(cs: CocoonSet, tb: ToolboxSpec): Pod {
  const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
  const pod = newManagedPod(cs, podName, ROLE_TOOLBOX, tb.name);
  applyVMSpec(
    fromToolboxSpec(tb, vmNameForPod(cs.metadata.namespace ?? "", podName), cs.spec.snapshotPolicy),
    pod,
  );
  if (tb.mode === TOOLBOX_MODE_STATIC) {
    applyVMRuntime(
      { vmID: tb.staticVMID ?? "", ip: tb.staticIP ?? "", vncPort: tb.vncPort ?? 0 },
      pod,
    );
  }
  pod.spec!.containers[0].resources = podResources(tb.resources, tb.storage);
  return pod;
}

/** The parts every managed pod shares: labels, owner, tolerations, placement, container. */
function newManagedPod(cs: CocoonSet, podName: string, role: string, slotLabel: string): Pod {
  const nodeSelector: Record<string, string> = {
    [LABEL_NODE_POOL]: cs.spec.nodePool || DEFAULT_NODE_POOL,
  };
  if (cs.spec.snapshotCompatibilityClass) {
    nodeSelector[LABEL_SNAPSHOT_COMPATIBILITY_CLASS] = cs.spec.snapshotCompatibilityClass;
  }
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: podName,
      namespace: cs.metadata.namespace,
      labels: {
        [LABEL_COCOON_SET]: cs.metadata.name ?? "",
        [LABEL_ROLE]: role,
        [LABEL_SLOT]: slotLabel,
        "app.kubernetes.io/name": cs.metadata.name ?? "",
      },
      annotations: { [ANNOTATION_COCOON_SET_GENERATION]: String(cs.metadata.generation ?? 0) },
    },
    spec: {
      terminationGracePeriodSeconds: 1,
      tolerations: [
        { key: TOLERATION_KEY, operator: "Exists" },
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
        { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
      ],
      nodeSelector,
      containers: [{ name: "agent", image: PLACEHOLDER_IMAGE }],
    },
  };
  setControllerReference(cs, pod, CocoonSets);
  return pod;
}

/** Container resources in canonical form, storage as ephemeral-storage request and limit. */
export function podResources(
  spec: VMResourceRequirements | undefined,
  storage: QuantityValue | undefined,
): ResourceRequirements {
  const out: ResourceRequirements & { claims?: { name: string; request?: string }[] } = {};
  const limits = canonicalResourceList(spec?.limits);
  const requests = canonicalResourceList(spec?.requests);
  if (limits && Object.keys(limits).length > 0) out.limits = limits;
  if (requests && Object.keys(requests).length > 0) out.requests = requests;
  if (spec?.claims) out.claims = deepCopy(spec.claims);
  if (storage !== undefined && storage !== null) {
    const q = parseQuantity(storage);
    if (!q.isZero()) {
      const value = q.toString();
      out.requests = { ...out.requests, "ephemeral-storage": value };
      out.limits = { ...out.limits, "ephemeral-storage": value };
    }
  }
  return out;
}

/** An affinity to one node by hostname: required (a pinned main) or preferred (a wake's hint). */
export function hostnameAffinity(kind: "required" | "preferred", nodeName: string): Affinity {
  const term: NodeSelectorTerm = {
    matchExpressions: [{ key: LABEL_HOSTNAME, operator: "In", values: [nodeName] }],
  };
  return {
    nodeAffinity: kind === "required"
      ? { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [term] } }
      : { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, preference: term }] },
  };
}

/** Whether a managed pod failed: vk-cocoon's lifecycle `failed` (usually first) or phase Failed. */
export function isPodFailed(pod: Pod): boolean {
  return readLifecycleState(pod) === LIFECYCLE_STATE_FAILED || isPodPhaseFailed(pod);
}

/**
 * The List step: the pods labelled for cs that cs controls (by UID: a stale label alone never
 * counts). unsafeDisableDeepCopy: the cache's own objects, for callers that never mutate them.
 */
export async function listOwnedPods(
  reader: Reader,
  cs: CocoonSet,
  signal?: AbortSignal,
  { unsafeDisableDeepCopy = false } = {},
): Promise<Pod[]> {
  const name = cs.metadata.name ?? "";
  // A name over 63 characters is no label value: no pod carries it and a selector is refused.
  if (!isValidLabelValue(name)) return [];
  const list = await reader.list(Pods, {
    namespace: cs.metadata.namespace,
    labelSelector: { [LABEL_COCOON_SET]: name },
    signal,
    unsafeDisableDeepCopy,
  });
  return list.items.filter((p) => isControlledBy(p, cs));
}
