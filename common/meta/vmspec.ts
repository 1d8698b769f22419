/**
 * VMSpec: the annotation contract the operator writes on a pod for vk-cocoon to build the VM
 * from. Apply only ever adds (empty fields never clear an existing annotation).
 */
import type { Pod } from "../../kube/core.ts";
import type { AgentSpec, ToolboxSpec, VMOptions } from "../apis/v1/cocoonset_types.ts";
import {
  agentModeOrDefault,
  backendOrDefault,
  osTypeOrDefault,
  SnapshotPolicyMainOnly,
  SnapshotPolicyNever,
  snapshotPolicyOrDefault,
  toolboxModeOrDefault,
  ToolboxModeStatic,
} from "../apis/v1/enums.ts";
import { quantityString } from "../k8s/quantity.ts";
import { annotation, ensureAnnotations, formatPort, setIfNotEmpty } from "./annotations.ts";
import {
  AnnotationBackend,
  AnnotationConnType,
  AnnotationForcePull,
  AnnotationForkFrom,
  AnnotationImage,
  AnnotationManaged,
  AnnotationMode,
  AnnotationNetwork,
  AnnotationNoDirectIO,
  AnnotationOS,
  AnnotationProbePort,
  AnnotationSnapshotPolicy,
  AnnotationStorage,
  AnnotationTrue,
  AnnotationVMName,
  RoleMain,
} from "./keys.ts";

/** The VM description carried in pod annotations. Strings are "" when unset. */
export interface VMSpec {
  vmName: string;
  image: string;
  mode: string;
  os: string;
  storage: string;
  network: string;
  snapshotPolicy: string;
  forkFrom: string;
  managed: boolean;
  forcePull: boolean;
  noDirectIO: boolean;
  connType: string;
  backend: string;
  probePort: string;
}

/** A VMSpec with every field at its zero value, overridden by fields. */
export function vmSpec(fields: Partial<VMSpec> = {}): VMSpec {
  return {
    vmName: "",
    image: "",
    mode: "",
    os: "",
    storage: "",
    network: "",
    snapshotPolicy: "",
    forkFrom: "",
    managed: false,
    forcePull: false,
    noDirectIO: false,
    connType: "",
    backend: "",
    probePort: "",
    ...fields,
  };
}

/** Field-by-field equality (Go compares VMSpec structs with ==). */
export function vmSpecEqual(a: VMSpec, b: VMSpec): boolean {
  return (Object.keys(a) as (keyof VMSpec)[]).every((k) => a[k] === b[k]);
}

/** Writes the spec into the pod's annotations; empty strings and false flags are skipped. */
export function applyVMSpec(spec: VMSpec, pod: Pod): void {
  const a = ensureAnnotations(pod);
  setIfNotEmpty(a, AnnotationVMName, spec.vmName);
  setIfNotEmpty(a, AnnotationImage, spec.image);
  setIfNotEmpty(a, AnnotationMode, spec.mode);
  setIfNotEmpty(a, AnnotationOS, spec.os);
  setIfNotEmpty(a, AnnotationStorage, spec.storage);
  setIfNotEmpty(a, AnnotationNetwork, spec.network);
  setIfNotEmpty(a, AnnotationSnapshotPolicy, spec.snapshotPolicy);
  setIfNotEmpty(a, AnnotationForkFrom, spec.forkFrom);
  setIfNotEmpty(a, AnnotationConnType, spec.connType);
  setIfNotEmpty(a, AnnotationBackend, spec.backend);
  if (spec.managed) a[AnnotationManaged] = AnnotationTrue;
  if (spec.forcePull) a[AnnotationForcePull] = AnnotationTrue;
  if (spec.noDirectIO) a[AnnotationNoDirectIO] = AnnotationTrue;
  setIfNotEmpty(a, AnnotationProbePort, spec.probePort);
}

/** Reads the spec back from the pod's annotations. */
export function parseVMSpec(pod: Pod): VMSpec {
  const get = (key: string) => annotation(pod, key);
  return {
    vmName: get(AnnotationVMName),
    image: get(AnnotationImage),
    mode: get(AnnotationMode),
    os: get(AnnotationOS),
    storage: get(AnnotationStorage),
    network: get(AnnotationNetwork),
    snapshotPolicy: get(AnnotationSnapshotPolicy),
    forkFrom: get(AnnotationForkFrom),
    managed: get(AnnotationManaged) === AnnotationTrue,
    forcePull: get(AnnotationForcePull) === AnnotationTrue,
    noDirectIO: get(AnnotationNoDirectIO) === AnnotationTrue,
    connType: get(AnnotationConnType),
    backend: get(AnnotationBackend),
    probePort: get(AnnotationProbePort),
  };
}

/** The spec of an agent VM. Agent VMs are always managed; enum defaults are filled in. */
export function fromAgentSpec(
  spec: AgentSpec,
  vmName: string,
  snapshotPolicy: string | undefined,
  forkFrom: string,
): VMSpec {
  return {
    // `?? ""`: a missing image is Go's zero string, which Apply skips.
    ...fromVMOptions(
      spec,
      vmName,
      spec.image ?? "",
      agentModeOrDefault(spec.mode),
      snapshotPolicy,
    ),
    forkFrom,
    managed: true,
  };
}

/** The spec of a toolbox VM. Static toolboxes wrap an existing VM, so they are not managed. */
export function fromToolboxSpec(
  spec: ToolboxSpec,
  vmName: string,
  snapshotPolicy: string | undefined,
): VMSpec {
  return {
    ...fromVMOptions(
      spec,
      vmName,
      spec.image ?? "",
      toolboxModeOrDefault(spec.mode),
      snapshotPolicy,
    ),
    managed: spec.mode !== ToolboxModeStatic,
  };
}

function fromVMOptions(
  o: VMOptions,
  vmName: string,
  image: string,
  mode: string,
  snapshotPolicy: string | undefined,
): VMSpec {
  return vmSpec({
    vmName,
    image,
    mode,
    os: osTypeOrDefault(o.os),
    storage: quantityString(o.storage),
    network: o.network ?? "",
    snapshotPolicy: snapshotPolicyOrDefault(snapshotPolicy),
    forcePull: o.forcePull ?? false,
    noDirectIO: o.noDirectIO ?? false,
    connType: o.connType ?? "",
    backend: backendOrDefault(o.backend),
    probePort: formatPort(o.probePort),
  });
}

/** Whether the VM gets snapshotted, from its snapshot policy (empty = always) and its role. */
export function shouldSnapshotVM(spec: VMSpec, role: string): boolean {
  switch (snapshotPolicyOrDefault(spec.snapshotPolicy)) {
    case SnapshotPolicyNever:
      return false;
    case SnapshotPolicyMainOnly:
      return role === RoleMain;
    default:
      return true;
  }
}
