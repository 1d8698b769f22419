/**
 * The closed string sets of the cocoonset.cocoonstack.io/v1 API. Each enum is a readonly array
 * (the single source the CRD schema's `enum` lists are generated from), a type union derived from
 * it, a type guard, and — where the API defines one — the default that an empty value stands for.
 */

/** True when value is one of values (a typed membership test for the arrays below). */
function oneOf<T extends string>(values: readonly T[], value: unknown): value is T {
  return typeof value === "string" && (values as readonly string[]).includes(value);
}

// ---------------------------------------------------------------------------------------------
// AgentMode: how an agent VM gets its disk (clone a snapshot, or boot the image).

export const AGENT_MODE_CLONE = "clone";
export const AGENT_MODE_RUN = "run";
/** Every valid AgentMode, in API order. */
export const AGENT_MODES = [AGENT_MODE_CLONE, AGENT_MODE_RUN] as const;
export type AgentMode = typeof AGENT_MODES[number];
/** The mode an agent gets when spec.agent.mode is empty. */
export const DEFAULT_AGENT_MODE: AgentMode = AGENT_MODE_CLONE;
/** Reports whether m is a recognised AgentMode ("" is not). */
export function isValidAgentMode(m: unknown): m is AgentMode {
  return oneOf(AGENT_MODES, m);
}
/** m when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function agentModeOrDefault(m: AgentMode | "" | undefined): AgentMode;
export function agentModeOrDefault(m: string | undefined): string;
export function agentModeOrDefault(m: string | undefined): string {
  return m || DEFAULT_AGENT_MODE;
}

// ---------------------------------------------------------------------------------------------
// ToolboxMode: run an image, clone a snapshot, or adopt a VM that already exists (static).

export const TOOLBOX_MODE_RUN = "run";
export const TOOLBOX_MODE_CLONE = "clone";
export const TOOLBOX_MODE_STATIC = "static";
/** Every valid ToolboxMode, in API order. */
export const TOOLBOX_MODES = [TOOLBOX_MODE_RUN, TOOLBOX_MODE_CLONE, TOOLBOX_MODE_STATIC] as const;
export type ToolboxMode = typeof TOOLBOX_MODES[number];
/** The mode a toolbox gets when its mode is empty. */
export const DEFAULT_TOOLBOX_MODE: ToolboxMode = TOOLBOX_MODE_RUN;
/** Reports whether m is a recognised ToolboxMode ("" is not). */
export function isValidToolboxMode(m: unknown): m is ToolboxMode {
  return oneOf(TOOLBOX_MODES, m);
}
/** m when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function toolboxModeOrDefault(m: ToolboxMode | "" | undefined): ToolboxMode;
export function toolboxModeOrDefault(m: string | undefined): string;
export function toolboxModeOrDefault(m: string | undefined): string {
  return m || DEFAULT_TOOLBOX_MODE;
}

// ---------------------------------------------------------------------------------------------
// OSType: the guest operating system family.

export const OS_LINUX = "linux";
export const OS_WINDOWS = "windows";
export const OS_ANDROID = "android";
export const OS_MACOS = "macos";
/** Every valid OSType, in API order. */
export const OS_TYPES = [OS_LINUX, OS_WINDOWS, OS_ANDROID, OS_MACOS] as const;
export type OSType = typeof OS_TYPES[number];
/** The guest OS assumed when os is empty. */
export const DEFAULT_OS_TYPE: OSType = OS_LINUX;
/** Reports whether o is a recognised OSType ("" is not). */
export function isValidOSType(o: unknown): o is OSType {
  return oneOf(OS_TYPES, o);
}
/** o when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function osTypeOrDefault(o: OSType | "" | undefined): OSType;
export function osTypeOrDefault(o: string | undefined): string;
export function osTypeOrDefault(o: string | undefined): string {
  return o || DEFAULT_OS_TYPE;
}

// ---------------------------------------------------------------------------------------------
// SnapshotPolicy: which VMs of a set get snapshotted when they go away.

export const SNAPSHOT_POLICY_ALWAYS = "always";
export const SNAPSHOT_POLICY_MAIN_ONLY = "main-only";
export const SNAPSHOT_POLICY_NEVER = "never";
/** Every valid SnapshotPolicy, in API order. */
export const SNAPSHOT_POLICIES = [
  SNAPSHOT_POLICY_ALWAYS,
  SNAPSHOT_POLICY_MAIN_ONLY,
  SNAPSHOT_POLICY_NEVER,
] as const;
export type SnapshotPolicy = typeof SNAPSHOT_POLICIES[number];
/** The policy used when snapshotPolicy is empty. */
export const DEFAULT_SNAPSHOT_POLICY: SnapshotPolicy = SNAPSHOT_POLICY_ALWAYS;
/** Reports whether p is a recognised SnapshotPolicy ("" is not). */
export function isValidSnapshotPolicy(p: unknown): p is SnapshotPolicy {
  return oneOf(SNAPSHOT_POLICIES, p);
}
/** p when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function snapshotPolicyOrDefault(p: SnapshotPolicy | "" | undefined): SnapshotPolicy;
export function snapshotPolicyOrDefault(p: string | undefined): string;
export function snapshotPolicyOrDefault(p: string | undefined): string {
  return p || DEFAULT_SNAPSHOT_POLICY;
}

// ---------------------------------------------------------------------------------------------
// HibernatePolicy: whether a suspended set keeps its node seat (retain) or gives it up (release).

export const HIBERNATE_POLICY_RETAIN = "retain";
export const HIBERNATE_POLICY_RELEASE = "release";
/** Every valid HibernatePolicy, in API order. */
export const HIBERNATE_POLICIES = [HIBERNATE_POLICY_RETAIN, HIBERNATE_POLICY_RELEASE] as const;
export type HibernatePolicy = typeof HIBERNATE_POLICIES[number];
/** The policy used when hibernatePolicy is empty. */
export const DEFAULT_HIBERNATE_POLICY: HibernatePolicy = HIBERNATE_POLICY_RETAIN;
/** Reports whether p is a recognised HibernatePolicy ("" is not). */
export function isValidHibernatePolicy(p: unknown): p is HibernatePolicy {
  return oneOf(HIBERNATE_POLICIES, p);
}
/** p when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function hibernatePolicyOrDefault(p: HibernatePolicy | "" | undefined): HibernatePolicy;
export function hibernatePolicyOrDefault(p: string | undefined): string;
export function hibernatePolicyOrDefault(p: string | undefined): string {
  return p || DEFAULT_HIBERNATE_POLICY;
}

// ---------------------------------------------------------------------------------------------
// ConnType: the remote-access protocol advertised for a VM. It has no default: empty means
// "infer it from the OS" (see common/meta connectionType).

export const CONN_TYPE_SSH = "ssh";
export const CONN_TYPE_RDP = "rdp";
export const CONN_TYPE_VNC = "vnc";
export const CONN_TYPE_ADB = "adb";
/** Every valid ConnType, in API order. */
export const CONN_TYPES = [CONN_TYPE_SSH, CONN_TYPE_RDP, CONN_TYPE_VNC, CONN_TYPE_ADB] as const;
export type ConnType = typeof CONN_TYPES[number];
/** Reports whether c is a recognised ConnType ("" is not). */
export function isValidConnType(c: unknown): c is ConnType {
  return oneOf(CONN_TYPES, c);
}

// ---------------------------------------------------------------------------------------------
// Backend: the hypervisor that runs the VM.

export const BACKEND_CLOUD_HYPERVISOR = "cloud-hypervisor";
export const BACKEND_FIRECRACKER = "firecracker";
/** Every valid Backend, in API order. */
export const BACKENDS = [BACKEND_CLOUD_HYPERVISOR, BACKEND_FIRECRACKER] as const;
export type Backend = typeof BACKENDS[number];
/** The hypervisor used when backend is empty. */
export const DEFAULT_BACKEND: Backend = BACKEND_CLOUD_HYPERVISOR;
/** Reports whether b is a recognised Backend ("" is not). */
export function isValidBackend(b: unknown): b is Backend {
  return oneOf(BACKENDS, b);
}
/** b when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function backendOrDefault(b: Backend | "" | undefined): Backend;
export function backendOrDefault(b: string | undefined): string;
export function backendOrDefault(b: string | undefined): string {
  return b || DEFAULT_BACKEND;
}

// ---------------------------------------------------------------------------------------------
// CocoonSetPhase: the coarse state reported in status.phase.

export const COCOON_SET_PHASE_PENDING = "Pending";
export const COCOON_SET_PHASE_RUNNING = "Running";
export const COCOON_SET_PHASE_SCALING = "Scaling";
export const COCOON_SET_PHASE_SUSPENDING = "Suspending";
export const COCOON_SET_PHASE_SUSPENDED = "Suspended";
export const COCOON_SET_PHASE_WAKING = "Waking";
export const COCOON_SET_PHASE_MIGRATING = "Migrating";
export const COCOON_SET_PHASE_FAILED = "Failed";
/** Every valid CocoonSetPhase, in API order. */
export const COCOON_SET_PHASES = [
  COCOON_SET_PHASE_PENDING,
  COCOON_SET_PHASE_RUNNING,
  COCOON_SET_PHASE_SCALING,
  COCOON_SET_PHASE_SUSPENDING,
  COCOON_SET_PHASE_SUSPENDED,
  COCOON_SET_PHASE_WAKING,
  COCOON_SET_PHASE_MIGRATING,
  COCOON_SET_PHASE_FAILED,
] as const;
export type CocoonSetPhase = typeof COCOON_SET_PHASES[number];
/** Reports whether p is a recognised CocoonSetPhase. */
export function isValidCocoonSetPhase(p: unknown): p is CocoonSetPhase {
  return oneOf(COCOON_SET_PHASES, p);
}

// ---------------------------------------------------------------------------------------------
// HibernationDesire: what a CocoonHibernation asks for.

export const HIBERNATION_DESIRE_HIBERNATE = "Hibernate";
export const HIBERNATION_DESIRE_WAKE = "Wake";
/** Every valid HibernationDesire, in API order. */
export const HIBERNATION_DESIRES = [HIBERNATION_DESIRE_HIBERNATE, HIBERNATION_DESIRE_WAKE] as const;
export type HibernationDesire = typeof HIBERNATION_DESIRES[number];
/** Reports whether d is a recognised HibernationDesire ("" is not). */
export function isValidHibernationDesire(d: unknown): d is HibernationDesire {
  return oneOf(HIBERNATION_DESIRES, d);
}

// ---------------------------------------------------------------------------------------------
// CocoonHibernationPhase: the state reported in a CocoonHibernation's status.phase.

export const COCOON_HIBERNATION_PHASE_PENDING = "Pending";
export const COCOON_HIBERNATION_PHASE_HIBERNATING = "Hibernating";
export const COCOON_HIBERNATION_PHASE_HIBERNATED = "Hibernated";
export const COCOON_HIBERNATION_PHASE_WAKING = "Waking";
export const COCOON_HIBERNATION_PHASE_ACTIVE = "Active";
export const COCOON_HIBERNATION_PHASE_FAILED = "Failed";
/** Every valid CocoonHibernationPhase, in API order. */
export const COCOON_HIBERNATION_PHASES = [
  COCOON_HIBERNATION_PHASE_PENDING,
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_WAKING,
  COCOON_HIBERNATION_PHASE_ACTIVE,
  COCOON_HIBERNATION_PHASE_FAILED,
] as const;
export type CocoonHibernationPhase = typeof COCOON_HIBERNATION_PHASES[number];
/** Reports whether p is a recognised CocoonHibernationPhase. */
export function isValidCocoonHibernationPhase(p: unknown): p is CocoonHibernationPhase {
  return oneOf(COCOON_HIBERNATION_PHASES, p);
}
