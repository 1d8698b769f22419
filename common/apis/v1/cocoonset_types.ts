/** CocoonSet: one main agent VM, optional sub-agents and toolbox VMs, managed as a set. */
import type { KubeObject, ObjectList } from "../../../kube/object.ts";
import type { EnvFromSource } from "../../../kube/core.ts";
import type { Condition } from "../../k8s/condition.ts";
import type {
  AgentMode,
  Backend,
  CocoonSetPhase,
  ConnType,
  HibernatePolicy,
  OSType,
  SnapshotPolicy,
  ToolboxMode,
} from "./enums.ts";

/**
 * A resource quantity as JSON carries it (int-or-string: "100Gi" or 1024). Parse it with
 * common/k8s/quantity.ts.
 */
export type QuantityValue = string | number;

/**
 * Resource limits and requests as a CocoonSet carries them. Unlike a pod read back from the API
 * server (where quantities are canonical strings), values here are stored as the user wrote them
 * and may be JSON numbers; common/k8s canonicalResourceList turns them into pod form.
 */
export interface VMResourceRequirements {
  limits?: Record<string, QuantityValue>;
  requests?: Record<string, QuantityValue>;
  /** Dynamic resource claims, by name. */
  claims?: { name: string; request?: string }[];
}

/** VM-level options shared by the agent and every toolbox. */
export interface VMOptions {
  /** Guest OS; empty means linux. */
  os?: OSType;
  /** Hypervisor; empty means cloud-hypervisor. */
  backend?: Backend;
  /** Explicit connection protocol; empty means inferred from the OS. */
  connType?: ConnType;
  network?: string;
  forcePull?: boolean;
  noDirectIO?: boolean;
  /** TCP readiness port (0 = ICMP probe). */
  probePort?: number;
  /** Root volume size. */
  storage?: QuantityValue;
  resources?: VMResourceRequirements;
}

/** The agent VMs: slot 0 is the main agent, slots 1..replicas are sub-agents. */
export interface AgentSpec extends VMOptions {
  /** Number of sub-agents, in addition to the main agent. */
  replicas?: number;
  image: string;
  mode?: AgentMode;
  envFrom?: EnvFromSource[];
  serviceAccountName?: string;
}

/** One toolbox VM. */
export interface ToolboxSpec extends VMOptions {
  name: string;
  image?: string;
  mode?: ToolboxMode;
  /** Static mode: address of the existing VM. */
  staticIP?: string;
  /** Static mode: runtime id of the existing VM. */
  staticVMID?: string;
  vncPort?: number;
}

/** Desired state of a CocoonSet. */
export interface CocoonSetSpec {
  suspend?: boolean;
  snapshotPolicy?: SnapshotPolicy;
  hibernatePolicy?: HibernatePolicy;
  nodePool?: string;
  /** Immutable once set (enforced by a CEL rule in the CRD). */
  snapshotCompatibilityClass?: string;
  /** Pins the VM to a node; empty leaves placement to the scheduler. */
  nodeName?: string;
  agent: AgentSpec;
  toolboxes?: ToolboxSpec[];
}

/** Observed state of one agent VM. */
export interface AgentStatus {
  slot: number;
  role: string;
  podName?: string;
  vmName?: string;
  vmID?: string;
  ip?: string;
  phase?: string;
  forkedFrom?: string;
}

/** Observed state of one toolbox VM. */
export interface ToolboxStatus {
  name: string;
  podName?: string;
  vmName?: string;
  vmID?: string;
  ip?: string;
  phase?: string;
  connType?: ConnType;
  vncPort?: number;
}

/**
 * Observed state of a CocoonSet. The four counters are always written by the Go operator (no
 * omitempty); they are optional here only because a fresh object has no status yet.
 */
export interface CocoonSetStatus {
  observedGeneration?: number;
  phase?: CocoonSetPhase;
  readyAgents?: number;
  desiredAgents?: number;
  readyToolboxes?: number;
  desiredToolboxes?: number;
  agents?: AgentStatus[];
  toolboxes?: ToolboxStatus[];
  conditions?: Condition[];
}

/** A CocoonSet object as the API server serves it. */
export interface CocoonSet extends KubeObject {
  spec: CocoonSetSpec;
  status?: CocoonSetStatus;
}

/** A list of CocoonSets. */
export type CocoonSetList = ObjectList<CocoonSet>;
