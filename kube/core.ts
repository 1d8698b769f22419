import type { KubeObject, ObjectMeta } from "./object.ts";
import { resourceType } from "./resource.ts";

/** Built-in kinds the operator and its tests touch, typed by the fields they read or write. */

export interface Toleration {
  key?: string;
  operator?: "Exists" | "Equal";
  value?: string;
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  tolerationSeconds?: number;
}

export interface NodeSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  values?: string[];
}

export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
  matchFields?: NodeSelectorRequirement[];
}

export interface NodeAffinity {
  requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: NodeSelectorTerm[] };
  preferredDuringSchedulingIgnoredDuringExecution?: {
    weight: number;
    preference: NodeSelectorTerm;
  }[];
}

export interface Affinity {
  nodeAffinity?: NodeAffinity;
}

export interface ResourceRequirements {
  limits?: Record<string, string>;
  requests?: Record<string, string>;
}

export interface EnvFromSource {
  prefix?: string;
  configMapRef?: { name: string; optional?: boolean };
  secretRef?: { name: string; optional?: boolean };
}

export interface EnvVar {
  name: string;
  value?: string;
}

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: EnvFromSource[];
  resources?: ResourceRequirements;
}

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

export interface PodCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastProbeTime?: string;
}

export interface ContainerState {
  running?: { startedAt?: string };
  waiting?: { reason?: string; message?: string };
  terminated?: { exitCode: number; reason?: string; message?: string };
}

export interface ContainerStatus {
  name: string;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  state?: ContainerState;
  started?: boolean;
}

export interface PodStatus {
  phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
  conditions?: PodCondition[];
  containerStatuses?: ContainerStatus[];
  podIP?: string;
  hostIP?: string;
  message?: string;
  reason?: string;
}

export interface Pod extends KubeObject {
  spec?: PodSpec;
  status?: PodStatus;
}

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

export interface Namespace extends KubeObject {
  status?: { phase?: string };
}

export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

export interface ServiceAccount extends KubeObject {
  secrets?: { name: string }[];
}

export const Pods = resourceType<Pod>({
  group: "",
  version: "v1",
  kind: "Pod",
  plural: "pods",
  namespaced: true,
  statusSubresource: true,
});

export const Events = resourceType<CoreEvent>({
  group: "",
  version: "v1",
  kind: "Event",
  plural: "events",
  namespaced: true,
  statusSubresource: false,
});

export const Leases = resourceType<Lease>({
  group: "coordination.k8s.io",
  version: "v1",
  kind: "Lease",
  plural: "leases",
  namespaced: true,
  statusSubresource: false,
});

export const Namespaces = resourceType<Namespace>({
  group: "",
  version: "v1",
  kind: "Namespace",
  plural: "namespaces",
  namespaced: false,
  statusSubresource: true,
});

export const ConfigMaps = resourceType<ConfigMap>({
  group: "",
  version: "v1",
  kind: "ConfigMap",
  plural: "configmaps",
  namespaced: true,
  statusSubresource: false,
});

export const ServiceAccounts = resourceType<ServiceAccount>({
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
