/**
 * The VM-name index: which cached pods, CocoonSets and CocoonHibernations of any namespace name
 * a VM, found with one cache lookup instead of reading each namespace the name could be split
 * into (the keys: docs/cocoonset.md, "Where the checks read"). A lookup only narrows; claims.ts
 * keeps the objects that really name the VM.
 *
 * @module
 */
import type { IndexFunc, KubeObject, Manager, Pod, Reader, ResourceType } from "../kube/mod.ts";
import { Pods } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { CocoonHibernation } from "../common/apis/v1/cocoonhibernation_types.ts";
import { CocoonHibernations, CocoonSets } from "../common/apis/v1/resources.ts";
import { agentVMNamePrefix, parseVMSpec, vmNameForPod } from "../common/meta/mod.ts";

/** The cache index of pods, CocoonSets and CocoonHibernations by the VM names they name. */
export const VM_NAME_INDEX = "vmName";

/** Stands for every agent slot of a set, above replicas too: `vk-<ns>-<set>-*`. */
const AGENT_WILDCARD = "*";

/** A slot suffix as extractAgentSlot reads it (strconv.Atoi without a sign other than "+"). */
const SLOT_SUFFIX = /^\+?[0-9]+$/;

/** The toolbox names a set's VMs may be derived from (spec and status). */
export function setToolboxNames(cs: CocoonSet): string[] {
  return [
    ...(cs.spec?.toolboxes ?? []).map((t) => t.name),
    ...(cs.status?.toolboxes ?? []).map((t) => t.name),
  ].filter((n): n is string => typeof n === "string" && n !== "");
}

function distinct(values: string[]): string[] {
  return [...new Set(values.filter((v) => v !== ""))];
}

/** A pod's index keys: its derived VM name and its vm-name annotation. */
export function podVMNameKeys(pod: Pod): string[] {
  const ns = pod.metadata.namespace ?? "";
  return distinct([vmNameForPod(ns, pod.metadata.name ?? ""), parseVMSpec(pod).vmName]);
}

/** A set's index keys: its agent wildcard and each toolbox VM name. */
export function setVMNameKeys(cs: CocoonSet): string[] {
  const ns = cs.metadata.namespace ?? "";
  const name = cs.metadata.name ?? "";
  return distinct([
    agentVMNamePrefix(ns, name) + AGENT_WILDCARD,
    ...setToolboxNames(cs).map((tb) => vmNameForPod(ns, `${name}-${tb}`)),
  ]);
}

/** A request's index keys: the VM its target derives and the VM its status recorded. */
export function requestVMNameKeys(h: CocoonHibernation): string[] {
  const ns = h.metadata.namespace ?? "";
  return distinct([vmNameForPod(ns, h.spec?.podRef?.name ?? ""), h.status?.vmName ?? ""]);
}

/**
 * The keys to look vmName up under: the name itself and, when it ends in an agent slot, the
 * wildcard of the sets whose agents it could be.
 */
export function vmNameLookupKeys(vmName: string): string[] {
  const keys = [vmName];
  const dash = vmName.lastIndexOf("-");
  if (dash > 0 && SLOT_SUFFIX.test(vmName.slice(dash + 1))) {
    keys.push(vmName.slice(0, dash + 1) + AGENT_WILDCARD);
  }
  return keys;
}

/** The three kinds the index covers, each with its keys. */
export const VM_NAME_INDEXES: readonly {
  rt: ResourceType<KubeObject>;
  keys: IndexFunc<KubeObject>;
}[] = [
  { rt: Pods, keys: podVMNameKeys as IndexFunc<KubeObject> },
  { rt: CocoonSets, keys: setVMNameKeys as IndexFunc<KubeObject> },
  { rt: CocoonHibernations, keys: requestVMNameKeys as IndexFunc<KubeObject> },
];

/** Registers VM_NAME_INDEX on the three kinds in mgr's cache, unless another controller did. */
export function registerVMNameIndex(mgr: Manager): void {
  for (const { rt, keys } of VM_NAME_INDEXES) {
    if (!mgr.cache.informerFor(rt).hasIndex(VM_NAME_INDEX)) {
      mgr.indexField(rt, VM_NAME_INDEX, keys);
    }
  }
}

/** The index of mgr's cache (registerVMNameIndex registers it). */
export function managerVMNameIndex(mgr: Manager): VMNameIndex {
  return cachedVMNameIndex(mgr.client, (namespace) => mgr.cache.holdsNamespace(namespace));
}

/**
 * Where the gate and the tenancy checks look VM names up, and which namespaces the cache holds
 * (a sharded replica's does not hold every one; those are read past the cache).
 */
export interface VMNameIndex {
  /** The cached objects of rt filed under key. Read-only: they may be the cache's own copies. */
  lookup<T extends KubeObject>(
    rt: ResourceType<T>,
    key: string,
    signal?: AbortSignal,
  ): Promise<T[]>;
  /** Whether the cache holds the objects of namespace. */
  holds(namespace: string): boolean;
}

/** The index as a cached client serves it from VM_NAME_INDEX (registerVMNameIndex). */
export function cachedVMNameIndex(
  cache: Reader,
  holds: (namespace: string) => boolean = () => true,
): VMNameIndex {
  return {
    async lookup(rt, key, signal) {
      const list = await cache.list(rt, {
        matchingFields: { [VM_NAME_INDEX]: key },
        unsafeDisableDeepCopy: true,
        signal,
      });
      return list.items;
    },
    holds,
  };
}

/** The index computed by listing every object of the kind: for a reader without the index. */
export function scannedVMNameIndex(reader: Reader): VMNameIndex {
  return {
    async lookup<T extends KubeObject>(rt: ResourceType<T>, key: string, signal?: AbortSignal) {
      const keysOf = VM_NAME_INDEXES.find((i) => i.rt.plural === rt.plural)?.keys;
      if (!keysOf) throw new Error(`no VM name index on ${rt.plural}`);
      const list = await reader.list(rt, { unsafeDisableDeepCopy: true, signal });
      return list.items.filter((o) => keysOf(o).includes(key));
    },
    holds: () => true,
  };
}
