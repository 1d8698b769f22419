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
  SNAPSHOT_POLICY_MAIN_ONLY,
  SNAPSHOT_POLICY_NEVER,
  snapshotPolicyOrDefault,
  TOOLBOX_MODE_STATIC,
  toolboxModeOrDefault,
} from "../apis/v1/enums.ts";
import { quantityString } from "../k8s/quantity.ts";
import { annotation, ensureAnnotations, formatPort, setIfNotEmpty } from "./annotations.ts";
import {
  ANNOTATION_BACKEND,
  ANNOTATION_CONN_TYPE,
  ANNOTATION_FORCE_PULL,
  ANNOTATION_FORK_FROM,
  ANNOTATION_IMAGE,
  ANNOTATION_MANAGED,
  ANNOTATION_MODE,
  ANNOTATION_NETWORK,
  ANNOTATION_NO_DIRECT_IO,
  ANNOTATION_OS,
  ANNOTATION_PROBE_PORT,
  ANNOTATION_SNAPSHOT_POLICY,
  ANNOTATION_STORAGE,
  ANNOTATION_TRUE,
  ANNOTATION_VM_NAME,
  ROLE_MAIN,
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
  setIfNotEmpty(a, ANNOTATION_VM_NAME, spec.vmName);
  setIfNotEmpty(a, ANNOTATION_IMAGE, spec.image);
  setIfNotEmpty(a, ANNOTATION_MODE, spec.mode);
  setIfNotEmpty(a, ANNOTATION_OS, spec.os);
  setIfNotEmpty(a, ANNOTATION_STORAGE, spec.storage);
  setIfNotEmpty(a, ANNOTATION_NETWORK, spec.network);
  setIfNotEmpty(a, ANNOTATION_SNAPSHOT_POLICY, spec.snapshotPolicy);
  setIfNotEmpty(a, ANNOTATION_FORK_FROM, spec.forkFrom);
  setIfNotEmpty(a, ANNOTATION_CONN_TYPE, spec.connType);
  setIfNotEmpty(a, ANNOTATION_BACKEND, spec.backend);
  if (spec.managed) a[ANNOTATION_MANAGED] = ANNOTATION_TRUE;
  if (spec.forcePull) a[ANNOTATION_FORCE_PULL] = ANNOTATION_TRUE;
  if (spec.noDirectIO) a[ANNOTATION_NO_DIRECT_IO] = ANNOTATION_TRUE;
  setIfNotEmpty(a, ANNOTATION_PROBE_PORT, spec.probePort);
}

/** Reads the spec back from the pod's annotations. */
export function parseVMSpec(pod: Pod): VMSpec {
  const get = (key: string) => annotation(pod, key);
  return {
    vmName: get(ANNOTATION_VM_NAME),
    image: get(ANNOTATION_IMAGE),
    mode: get(ANNOTATION_MODE),
    os: get(ANNOTATION_OS),
    storage: get(ANNOTATION_STORAGE),
    network: get(ANNOTATION_NETWORK),
    snapshotPolicy: get(ANNOTATION_SNAPSHOT_POLICY),
    forkFrom: get(ANNOTATION_FORK_FROM),
    managed: get(ANNOTATION_MANAGED) === ANNOTATION_TRUE,
    forcePull: get(ANNOTATION_FORCE_PULL) === ANNOTATION_TRUE,
    noDirectIO: get(ANNOTATION_NO_DIRECT_IO) === ANNOTATION_TRUE,
    connType: get(ANNOTATION_CONN_TYPE),
    backend: get(ANNOTATION_BACKEND),
    probePort: get(ANNOTATION_PROBE_PORT),
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
    managed: spec.mode !== TOOLBOX_MODE_STATIC,
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
    case SNAPSHOT_POLICY_NEVER:
      return false;
    case SNAPSHOT_POLICY_MAIN_ONLY:
      return role === ROLE_MAIN;
    default:
      return true;
  }
}
