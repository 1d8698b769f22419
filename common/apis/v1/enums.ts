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

export const AgentModeClone = "clone";
export const AgentModeRun = "run";
/** Every valid AgentMode, in API order. */
export const AgentModes = [AgentModeClone, AgentModeRun] as const;
export type AgentMode = typeof AgentModes[number];
/** The mode an agent gets when spec.agent.mode is empty. */
export const DefaultAgentMode: AgentMode = AgentModeClone;
/** Reports whether m is a recognised AgentMode ("" is not). */
export function isValidAgentMode(m: unknown): m is AgentMode {
  return oneOf(AgentModes, m);
}
/** m when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function agentModeOrDefault(m: AgentMode | "" | undefined): AgentMode;
export function agentModeOrDefault(m: string | undefined): string;
export function agentModeOrDefault(m: string | undefined): string {
  return m || DefaultAgentMode;
}

// ---------------------------------------------------------------------------------------------
// ToolboxMode: run an image, clone a snapshot, or adopt a VM that already exists (static).

export const ToolboxModeRun = "run";
export const ToolboxModeClone = "clone";
export const ToolboxModeStatic = "static";
/** Every valid ToolboxMode, in API order. */
export const ToolboxModes = [ToolboxModeRun, ToolboxModeClone, ToolboxModeStatic] as const;
export type ToolboxMode = typeof ToolboxModes[number];
/** The mode a toolbox gets when its mode is empty. */
export const DefaultToolboxMode: ToolboxMode = ToolboxModeRun;
/** Reports whether m is a recognised ToolboxMode ("" is not). */
export function isValidToolboxMode(m: unknown): m is ToolboxMode {
  return oneOf(ToolboxModes, m);
}
/** m when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function toolboxModeOrDefault(m: ToolboxMode | "" | undefined): ToolboxMode;
export function toolboxModeOrDefault(m: string | undefined): string;
export function toolboxModeOrDefault(m: string | undefined): string {
  return m || DefaultToolboxMode;
}

// ---------------------------------------------------------------------------------------------
// OSType: the guest operating system family.

export const OSLinux = "linux";
export const OSWindows = "windows";
export const OSAndroid = "android";
export const OSMacos = "macos";
/** Every valid OSType, in API order. */
export const OSTypes = [OSLinux, OSWindows, OSAndroid, OSMacos] as const;
export type OSType = typeof OSTypes[number];
/** The guest OS assumed when os is empty. */
export const DefaultOSType: OSType = OSLinux;
/** Reports whether o is a recognised OSType ("" is not). */
export function isValidOSType(o: unknown): o is OSType {
  return oneOf(OSTypes, o);
}
/** o when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function osTypeOrDefault(o: OSType | "" | undefined): OSType;
export function osTypeOrDefault(o: string | undefined): string;
export function osTypeOrDefault(o: string | undefined): string {
  return o || DefaultOSType;
}

// ---------------------------------------------------------------------------------------------
// SnapshotPolicy: which VMs of a set get snapshotted when they go away.

export const SnapshotPolicyAlways = "always";
export const SnapshotPolicyMainOnly = "main-only";
export const SnapshotPolicyNever = "never";
/** Every valid SnapshotPolicy, in API order. */
export const SnapshotPolicies = [
  SnapshotPolicyAlways,
  SnapshotPolicyMainOnly,
  SnapshotPolicyNever,
] as const;
export type SnapshotPolicy = typeof SnapshotPolicies[number];
/** The policy used when snapshotPolicy is empty. */
export const DefaultSnapshotPolicy: SnapshotPolicy = SnapshotPolicyAlways;
/** Reports whether p is a recognised SnapshotPolicy ("" is not). */
export function isValidSnapshotPolicy(p: unknown): p is SnapshotPolicy {
  return oneOf(SnapshotPolicies, p);
}
/** p when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function snapshotPolicyOrDefault(p: SnapshotPolicy | "" | undefined): SnapshotPolicy;
export function snapshotPolicyOrDefault(p: string | undefined): string;
export function snapshotPolicyOrDefault(p: string | undefined): string {
  return p || DefaultSnapshotPolicy;
}

// ---------------------------------------------------------------------------------------------
// HibernatePolicy: whether a suspended set keeps its node seat (retain) or gives it up (release).

export const HibernatePolicyRetain = "retain";
export const HibernatePolicyRelease = "release";
/** Every valid HibernatePolicy, in API order. */
export const HibernatePolicies = [HibernatePolicyRetain, HibernatePolicyRelease] as const;
export type HibernatePolicy = typeof HibernatePolicies[number];
/** The policy used when hibernatePolicy is empty. */
export const DefaultHibernatePolicy: HibernatePolicy = HibernatePolicyRetain;
/** Reports whether p is a recognised HibernatePolicy ("" is not). */
export function isValidHibernatePolicy(p: unknown): p is HibernatePolicy {
  return oneOf(HibernatePolicies, p);
}
/** p when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function hibernatePolicyOrDefault(p: HibernatePolicy | "" | undefined): HibernatePolicy;
export function hibernatePolicyOrDefault(p: string | undefined): string;
export function hibernatePolicyOrDefault(p: string | undefined): string {
  return p || DefaultHibernatePolicy;
}

// ---------------------------------------------------------------------------------------------
// ConnType: the remote-access protocol advertised for a VM. It has no default: empty means
// "infer it from the OS" (see common/meta connectionType).

export const ConnTypeSSH = "ssh";
export const ConnTypeRDP = "rdp";
export const ConnTypeVNC = "vnc";
export const ConnTypeADB = "adb";
/** Every valid ConnType, in API order. */
export const ConnTypes = [ConnTypeSSH, ConnTypeRDP, ConnTypeVNC, ConnTypeADB] as const;
export type ConnType = typeof ConnTypes[number];
/** Reports whether c is a recognised ConnType ("" is not). */
export function isValidConnType(c: unknown): c is ConnType {
  return oneOf(ConnTypes, c);
}

// ---------------------------------------------------------------------------------------------
// Backend: the hypervisor that runs the VM.

export const BackendCloudHypervisor = "cloud-hypervisor";
export const BackendFirecracker = "firecracker";
/** Every valid Backend, in API order. */
export const Backends = [BackendCloudHypervisor, BackendFirecracker] as const;
export type Backend = typeof Backends[number];
/** The hypervisor used when backend is empty. */
export const DefaultBackend: Backend = BackendCloudHypervisor;
/** Reports whether b is a recognised Backend ("" is not). */
export function isValidBackend(b: unknown): b is Backend {
  return oneOf(Backends, b);
}
/** b when set, otherwise the default; an unknown non-empty value passes through unchanged. */
export function backendOrDefault(b: Backend | "" | undefined): Backend;
export function backendOrDefault(b: string | undefined): string;
export function backendOrDefault(b: string | undefined): string {
  return b || DefaultBackend;
}

// ---------------------------------------------------------------------------------------------
// CocoonSetPhase: the coarse state reported in status.phase.

export const CocoonSetPhasePending = "Pending";
export const CocoonSetPhaseRunning = "Running";
export const CocoonSetPhaseScaling = "Scaling";
export const CocoonSetPhaseSuspending = "Suspending";
export const CocoonSetPhaseSuspended = "Suspended";
export const CocoonSetPhaseWaking = "Waking";
export const CocoonSetPhaseMigrating = "Migrating";
export const CocoonSetPhaseFailed = "Failed";
/** Every valid CocoonSetPhase, in API order. */
export const CocoonSetPhases = [
  CocoonSetPhasePending,
  CocoonSetPhaseRunning,
  CocoonSetPhaseScaling,
  CocoonSetPhaseSuspending,
  CocoonSetPhaseSuspended,
  CocoonSetPhaseWaking,
  CocoonSetPhaseMigrating,
  CocoonSetPhaseFailed,
] as const;
export type CocoonSetPhase = typeof CocoonSetPhases[number];
/** Reports whether p is a recognised CocoonSetPhase. */
export function isValidCocoonSetPhase(p: unknown): p is CocoonSetPhase {
  return oneOf(CocoonSetPhases, p);
}

// ---------------------------------------------------------------------------------------------
// HibernationDesire: what a CocoonHibernation asks for.

export const HibernationDesireHibernate = "Hibernate";
export const HibernationDesireWake = "Wake";
/** Every valid HibernationDesire, in API order. */
export const HibernationDesires = [HibernationDesireHibernate, HibernationDesireWake] as const;
export type HibernationDesire = typeof HibernationDesires[number];
/** Reports whether d is a recognised HibernationDesire ("" is not). */
export function isValidHibernationDesire(d: unknown): d is HibernationDesire {
  return oneOf(HibernationDesires, d);
}

// ---------------------------------------------------------------------------------------------
// CocoonHibernationPhase: the state reported in a CocoonHibernation's status.phase.

export const CocoonHibernationPhasePending = "Pending";
export const CocoonHibernationPhaseHibernating = "Hibernating";
export const CocoonHibernationPhaseHibernated = "Hibernated";
export const CocoonHibernationPhaseWaking = "Waking";
export const CocoonHibernationPhaseActive = "Active";
export const CocoonHibernationPhaseFailed = "Failed";
/** Every valid CocoonHibernationPhase, in API order. */
export const CocoonHibernationPhases = [
  CocoonHibernationPhasePending,
  CocoonHibernationPhaseHibernating,
  CocoonHibernationPhaseHibernated,
  CocoonHibernationPhaseWaking,
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseFailed,
] as const;
export type CocoonHibernationPhase = typeof CocoonHibernationPhases[number];
/** Reports whether p is a recognised CocoonHibernationPhase. */
export function isValidCocoonHibernationPhase(p: unknown): p is CocoonHibernationPhase {
  return oneOf(CocoonHibernationPhases, p);
}
