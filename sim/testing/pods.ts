/**
 * Pods shaped like the ones cocoon-operator creates (original-behaviour §1.2), for the
 * simulator's tests: labels, the single owner reference, the generation stamp and VM spec
 * annotations, the `agent` container, the three tolerations, the pool (and CPU class) node
 * selector, and the role's placement (main: none / required hostname / preferred hint;
 * sub-agent: bound to the main's node with fork-from; toolbox: none).
 *
 * @module
 */
import type { Pod } from "../../kube/core.ts";
import {
  ANNOTATION_BACKEND,
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_FORK_FROM,
  ANNOTATION_IMAGE,
  ANNOTATION_MANAGED,
  ANNOTATION_MODE,
  ANNOTATION_OS,
  ANNOTATION_SNAPSHOT_POLICY,
  ANNOTATION_VM_NAME,
  LABEL_COCOON_SET,
  LABEL_NODE_POOL,
  LABEL_ROLE,
  LABEL_SLOT,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  ROLE_MAIN,
  ROLE_SUB_AGENT,
  ROLE_TOOLBOX,
  TOLERATION_KEY,
} from "../../common/meta/keys.ts";

/** What varies between operator-built pods in the tests. */
export interface OperatorPodOptions {
  namespace: string;
  cocoonSet: string;
  /** Agent slot number (0 = main) or toolbox name. */
  slot: number | string;
  /** CocoonSet generation stamped on the pod (omitted when undefined). */
  generation?: number;
  pool?: string;
  cpuClass?: string;
  snapshotPolicy?: "always" | "main-only" | "never";
  /** Main only: required `kubernetes.io/hostname In [pinnedNode]`. */
  pinnedNode?: string;
  /** Main only: preferred (weight 100) `kubernetes.io/hostname In [hintNode]`. */
  hintNode?: string;
  /** Sub-agent only: the main's node (hard bind). */
  nodeName?: string;
  /** Extra annotations (restore-from-hibernate, knobs, static toolbox runtime hints...). */
  annotations?: Record<string, string>;
  /** Toolbox only: static mode (not managed). */
  staticToolbox?: boolean;
}

/** The operator's tolerations, exactly. */
const OPERATOR_TOLERATIONS = [
  { key: TOLERATION_KEY, operator: "Exists" as const },
  {
    key: "node.kubernetes.io/not-ready",
    operator: "Exists" as const,
    effect: "NoExecute" as const,
  },
  {
    key: "node.kubernetes.io/unreachable",
    operator: "Exists" as const,
    effect: "NoExecute" as const,
  },
];

/** The VM name the operator gives a pod of this set and slot. */
export function vmNameOf(namespace: string, cocoonSet: string, slot: number | string): string {
  return `vk-${namespace}-${cocoonSet}-${slot}`;
}

/** A pod as the operator would create it. */
export function operatorPod(o: OperatorPodOptions): Pod {
  const toolbox = typeof o.slot === "string";
  const role = toolbox ? ROLE_TOOLBOX : o.slot === 0 ? ROLE_MAIN : ROLE_SUB_AGENT;
  const name = `${o.cocoonSet}-${o.slot}`;
  const annotations: Record<string, string> = {
    ...(o.generation !== undefined
      ? { [ANNOTATION_COCOON_SET_GENERATION]: String(o.generation) }
      : {}),
    [ANNOTATION_VM_NAME]: vmNameOf(o.namespace, o.cocoonSet, o.slot),
    [ANNOTATION_IMAGE]: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
    [ANNOTATION_MODE]: toolbox ? (o.staticToolbox ? "static" : "run") : "clone",
    [ANNOTATION_OS]: "linux",
    [ANNOTATION_SNAPSHOT_POLICY]: o.snapshotPolicy ?? "always",
    [ANNOTATION_BACKEND]: "cloud-hypervisor",
    ...(o.staticToolbox ? {} : { [ANNOTATION_MANAGED]: "true" }),
    ...(role === ROLE_SUB_AGENT
      ? { [ANNOTATION_FORK_FROM]: vmNameOf(o.namespace, o.cocoonSet, 0) }
      : {}),
    ...o.annotations,
  };
  const hostname = (node: string) => ({
    matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In" as const, values: [node] }],
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: o.namespace,
      labels: {
        [LABEL_COCOON_SET]: o.cocoonSet,
        [LABEL_ROLE]: role,
        [LABEL_SLOT]: String(o.slot),
        "app.kubernetes.io/name": o.cocoonSet,
      },
      annotations,
      ownerReferences: [{
        apiVersion: "cocoonset.cocoonstack.io/v1",
        kind: "CocoonSet",
        name: o.cocoonSet,
        uid: "00000000-0000-4000-8000-00000000c0c0",
        controller: true,
        blockOwnerDeletion: true,
      }],
    },
    spec: {
      containers: [{
        name: "agent",
        image: "ghcr.io/cocoonstack/placeholder:latest",
        resources: { limits: { cpu: "2", memory: "4Gi" } },
      }],
      terminationGracePeriodSeconds: 1,
      tolerations: OPERATOR_TOLERATIONS,
      nodeSelector: {
        [LABEL_NODE_POOL]: o.pool ?? "default",
        ...(o.cpuClass ? { [LABEL_SNAPSHOT_COMPATIBILITY_CLASS]: o.cpuClass } : {}),
      },
      ...(o.nodeName ? { nodeName: o.nodeName } : {}),
      ...(o.pinnedNode
        ? {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [hostname(o.pinnedNode)],
              },
            },
          },
        }
        : o.hintNode
        ? {
          affinity: {
            nodeAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [{
                weight: 100,
                preference: hostname(o.hintNode),
              }],
            },
          },
        }
        : {}),
    },
  };
}
