/**
 * Built-in kinds the operator and its tests touch, typed by the fields they read or write (the
 * API server keeps every other field; a merge patch never drops what a type leaves out).
 *
 * @module
 */
import type { KubeObject, ObjectMeta } from "./object.ts";
import { type ResourceType, resourceType } from "./resource.ts";

/** A pod toleration (core/v1 Toleration). */
export interface Toleration {
  key?: string;
  operator?: "Exists" | "Equal";
  value?: string;
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  tolerationSeconds?: number;
}

/** One node-selector expression: key, operator, values. */
export interface NodeSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  values?: string[];
}

/** A node-selector term: its expressions are ANDed. */
export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
  matchFields?: NodeSelectorRequirement[];
}

/** Required and preferred node placement rules. */
export interface NodeAffinity {
  requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
  preferredDuringSchedulingIgnoredDuringExecution?: {
    weight: number;
    preference: NodeSelectorTerm;
  }[];
}

/** Pod scheduling affinity; only node affinity is modelled. */
export interface Affinity {
  nodeAffinity?: NodeAffinity;
}

/** Container limits and requests as Kubernetes quantity strings ("2", "4Gi"). */
export interface ResourceRequirements {
  limits?: Record<string, string>;
  requests?: Record<string, string>;
}

/** A ConfigMap or Secret whose keys become environment variables. */
export interface EnvFromSource {
  prefix?: string;
  configMapRef?: { name: string; optional?: boolean };
  secretRef?: { name: string; optional?: boolean };
}

/** One literal environment variable. */
export interface EnvVar {
  name: string;
  value?: string;
}

/** A pod container (the fields a VM-backed pod uses). */
export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: EnvFromSource[];
  resources?: ResourceRequirements;
}

/** core/v1 PodSpec, as far as the operator writes or reads it. */
export interface PodSpec {
  containers: Container[];
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  affinity?: Affinity;
  tolerations?: Toleration[];
  terminationGracePeriodSeconds?: number;
  serviceAccountName?: string;
  restartPolicy?: string;
  schedulerName?: string;
}

/** One entry of status.conditions (e.g. Ready). */
export interface PodCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastProbeTime?: string;
}

/** Exactly one of running, waiting or terminated is set. */
export interface ContainerState {
  running?: { startedAt?: string };
  waiting?: { reason?: string; message?: string };
  terminated?: { exitCode: number; reason?: string; message?: string };
}

/** The kubelet's (here vk-cocoon's) report on one container. */
export interface ContainerStatus {
  name: string;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  state?: ContainerState;
  started?: boolean;
}

/** core/v1 PodStatus; written by the kubelet, read by reconcilers. */
export interface PodStatus {
  phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
  conditions?: PodCondition[];
  containerStatuses?: ContainerStatus[];
  podIP?: string;
  hostIP?: string;
  message?: string;
  reason?: string;
}

/** core/v1 Pod. */
export interface Pod extends KubeObject {
  spec?: PodSpec;
  status?: PodStatus;
}

/** Points at an object, e.g. the object an Event is about (involvedObject). */
export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
  fieldPath?: string;
}

/** core/v1 Event (the type the recorder writes, as client-go's record package does). */
export interface CoreEvent extends KubeObject {
  involvedObject: ObjectReference;
  reason?: string;
  message?: string;
  source?: { component?: string; host?: string };
  firstTimestamp?: string;
  lastTimestamp?: string;
  count?: number;
  type?: "Normal" | "Warning";
  reportingComponent?: string;
  reportingInstance?: string;
}

/** Holder and timings of a Lease, as leader election writes them. */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** coordination.k8s.io/v1 Lease. */
export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

/** core/v1 Namespace (cluster-scoped). */
export interface Namespace extends KubeObject {
  status?: { phase?: string };
}

/** core/v1 ConfigMap. */
export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** core/v1 ServiceAccount. */
export interface ServiceAccount extends KubeObject {
  secrets?: { name: string }[];
}

/** The pods resource (core/v1, namespaced, status subresource). */
export const Pods: ResourceType<Pod> = resourceType<Pod>({
  group: "",
  version: "v1",
  kind: "Pod",
  plural: "pods",
  namespaced: true,
  statusSubresource: true,
});

/** The core/v1 events resource the Event recorder writes. */
export const Events: ResourceType<CoreEvent> = resourceType<CoreEvent>({
  group: "",
  version: "v1",
  kind: "Event",
  plural: "events",
  namespaced: true,
  statusSubresource: false,
});

/** The coordination.k8s.io/v1 leases resource used by leader election. */
export const Leases: ResourceType<Lease> = resourceType<Lease>({
  group: "coordination.k8s.io",
  version: "v1",
  kind: "Lease",
  plural: "leases",
  namespaced: true,
  statusSubresource: false,
});

/** The namespaces resource (cluster-scoped). */
export const Namespaces: ResourceType<Namespace> = resourceType<Namespace>({
  group: "",
  version: "v1",
  kind: "Namespace",
  plural: "namespaces",
  namespaced: false,
  statusSubresource: true,
});

/** The configmaps resource. */
export const ConfigMaps: ResourceType<ConfigMap> = resourceType<ConfigMap>({
  group: "",
  version: "v1",
  kind: "ConfigMap",
  plural: "configmaps",
  namespaced: true,
  statusSubresource: false,
});

/** The serviceaccounts resource. */
export const ServiceAccounts: ResourceType<ServiceAccount> = resourceType<ServiceAccount>({
  group: "",
  version: "v1",
  kind: "ServiceAccount",
  plural: "serviceaccounts",
  namespaced: true,
  statusSubresource: false,
});

/** Shorthand used in tests and fixtures. */
export function meta(name: string, namespace?: string, extra?: Partial<ObjectMeta>): ObjectMeta {
  return { name, ...(namespace ? { namespace } : {}), ...extra };
}

/** A node taint; pods must tolerate NoSchedule / NoExecute taints to be placed on the node. */
export interface Taint {
  key: string;
  value?: string;
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  timeAdded?: string;
}

export interface NodeCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastHeartbeatTime?: string;
  lastTransitionTime?: string;
}

export interface NodeSpec {
  taints?: Taint[];
  unschedulable?: boolean;
  providerID?: string;
}

export interface NodeStatus {
  capacity?: Record<string, string>;
  allocatable?: Record<string, string>;
  conditions?: NodeCondition[];
  addresses?: { type: string; address: string }[];
  nodeInfo?: Record<string, string>;
}

/** core/v1 Node (cluster-scoped). The VM simulator registers virtual nodes with these fields. */
export interface Node extends KubeObject {
  spec?: NodeSpec;
  status?: NodeStatus;
}

export const Nodes = resourceType<Node>({
  group: "",
  version: "v1",
  kind: "Node",
  plural: "nodes",
  namespaced: false,
  statusSubresource: true,
});

/**
 * core/v1 Binding: the body POSTed to a pod's `binding` subresource to assign it to a node
 * (spec.nodeName cannot be set by an update).
 */
export interface Binding extends KubeObject {
  target: ObjectReference;
}
