/**
 * Pod shapes of a CocoonSet: how owned pods are classified by role, how agent and toolbox pods
 * are built from the spec, and when a live pod has drifted from what the spec would build now.
 *
 * Every builder works on fresh objects: nothing read from the CocoonSet is shared with a pod, so
 * pods built in one pass can be serialised concurrently and the CocoonSet is never mutated (the
 * Go builder shared the limits map between sibling pods and crashed under parallel creates).
 */
import { deepCopy, setControllerReference } from "../kube/mod.ts";
import type { Affinity, NodeSelectorTerm, Pod, ResourceRequirements } from "../kube/mod.ts";
import type {
  CocoonSet,
  QuantityValue,
  ToolboxSpec,
  VMResourceRequirements,
} from "../common/apis/v1/cocoonset_types.ts";
import { ToolboxModeStatic } from "../common/apis/v1/enums.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { canonicalResourceList, parseQuantity } from "../common/k8s/quantity.ts";
import {
  AnnotationCocoonSetGeneration,
  applyVMRuntime,
  applyVMSpec,
  DefaultNodePool,
  fromAgentSpec,
  fromToolboxSpec,
  LabelCocoonSet,
  LabelNodePool,
  LabelRole,
  LabelSlot,
  LabelSnapshotCompatibilityClass,
  RoleMain,
  RoleSubAgent,
  RoleToolbox,
  TolerationKey,
  vmNameForDeployment,
  vmNameForPod,
} from "../common/meta/mod.ts";
import { parseGoInt } from "../common/meta/annotations.ts";

/** Name of the single container of every managed pod. */
export const agentContainerName = "agent";
/** Never pulled: vk-cocoon runs a VM instead. It only satisfies pod validation. */
export const placeholderImage = "ghcr.io/cocoonstack/placeholder:latest";
/** Label every managed pod carries besides the cocoon ones (app.kubernetes.io/name). */
export const LabelAppName = "app.kubernetes.io/name";
/** Node label the hostname affinities select on. */
export const LabelHostname = "kubernetes.io/hostname";
/** Weight of the preferred affinity a released-seat wake gives the node it left. */
export const preferredHintWeight = 100;

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

/**
 * Groups pods by their role label. Terminating pods are skipped (acting on them again would
 * loop deletes); pods with an unknown role or an unparsable slot only appear in allByName.
 */
export function classifyPods(pods: readonly Pod[]): ClassifiedPods {
  const out: ClassifiedPods = { sub: new Map(), toolbox: new Map(), allByName: new Map() };
  for (const pod of pods) {
    if (pod.metadata.deletionTimestamp) continue;
    const name = pod.metadata.name ?? "";
    out.allByName.set(name, pod);
    const labels = pod.metadata.labels ?? {};
    switch (labels[LabelRole]) {
      case RoleMain:
        out.main = pod;
        break;
      case RoleSubAgent: {
        const slot = parseGoInt(labels[LabelSlot] ?? "", 32);
        if (slot !== undefined) out.sub.set(slot, pod);
        break;
      }
      case RoleToolbox:
        out.toolbox.set(labels[LabelSlot] ?? "", pod);
        break;
    }
  }
  return out;
}

/** The pod name of agent slot `slot` (0 = main). */
export function agentPodName(csName: string, slot: number): string {
  return `${csName}-${slot}`;
}

/** The pod name of a toolbox; shared by the builder and the collision checks. */
export function toolboxPodName(csName: string, tbName: string): string {
  return `${csName}-${tbName}`;
}

/**
 * The desired pod of an agent slot. Slot 0 is the main agent; slots ≥ 1 are sub-agents forked
 * from mainVMName and hard-bound to bindNodeName (the main's node). A main of a set with
 * spec.nodeName gets a required hostname affinity instead of a bind, so it only lands there if
 * the scheduler agrees.
 */
export function buildAgentPod(
  cs: CocoonSet,
  slot: number,
  mainVMName = "",
  bindNodeName = "",
): Pod {
  const agent = cs.spec.agent;
  const isMain = slot === 0;
  const pod = newManagedPod(
    cs,
    agentPodName(cs.metadata.name ?? "", slot),
    isMain ? RoleMain : RoleSubAgent,
    String(slot),
  );
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
    pod.spec!.affinity = requiredHostnameAffinity(cs.spec.nodeName);
  }
  return pod;
}

/** The desired pod of a toolbox. Static toolboxes carry the runtime facts of their existing VM. */
export function buildToolboxPod(cs: CocoonSet, tb: ToolboxSpec): Pod {
  const podName = toolboxPodName(cs.metadata.name ?? "", tb.name);
  const pod = newManagedPod(cs, podName, RoleToolbox, tb.name);
  applyVMSpec(
    fromToolboxSpec(tb, vmNameForPod(cs.metadata.namespace ?? "", podName), cs.spec.snapshotPolicy),
    pod,
  );
  if (tb.mode === ToolboxModeStatic) {
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
    [LabelNodePool]: cs.spec.nodePool || DefaultNodePool,
  };
  if (cs.spec.snapshotCompatibilityClass) {
    nodeSelector[LabelSnapshotCompatibilityClass] = cs.spec.snapshotCompatibilityClass;
  }
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: podName,
      namespace: cs.metadata.namespace,
      labels: {
        [LabelCocoonSet]: cs.metadata.name ?? "",
        [LabelRole]: role,
        [LabelSlot]: slotLabel,
        [LabelAppName]: cs.metadata.name ?? "",
      },
      annotations: { [AnnotationCocoonSetGeneration]: String(cs.metadata.generation ?? 0) },
    },
    spec: {
      terminationGracePeriodSeconds: 1,
      tolerations: [
        { key: TolerationKey, operator: "Exists" },
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
        { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
      ],
      nodeSelector,
      containers: [{ name: agentContainerName, image: placeholderImage }],
    },
  };
  setControllerReference(cs, pod, CocoonSets);
  return pod;
}

/**
 * Container resources from a VM's requirements: quantities in canonical form, plus the VM's
 * storage as ephemeral-storage in both requests and limits (both, so Guaranteed-QoS defaulting
 * keeps it) for the scheduler to account the disk. Always fresh maps.
 */
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

/** A required affinity to one node by hostname (a pinned main). */
export function requiredHostnameAffinity(nodeName: string): Affinity {
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [hostnameTerm(nodeName)],
      },
    },
  };
}

/** A preferred affinity to one node by hostname (a released seat's wake hint). */
export function preferredHostnameAffinity(nodeName: string): Affinity {
  return {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [{
        weight: preferredHintWeight,
        preference: hostnameTerm(nodeName),
      }],
    },
  };
}

function hostnameTerm(nodeName: string): NodeSelectorTerm {
  return { matchExpressions: [{ key: LabelHostname, operator: "In", values: [nodeName] }] };
}
