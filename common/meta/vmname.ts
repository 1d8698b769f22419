/**
 * Deterministic VM names. Agent VMs are "vk-<ns>-<set>-<slot>"; toolbox and other pod VMs are
 * "vk-<ns>-<pod>". The slot parser refuses any suffix with a dash, so a toolbox called "db-2"
 * is never mistaken for agent slot 2.
 */
import type { Pod } from "../../kube/core.ts";
import { ROLE_MAIN, ROLE_SUB_AGENT, ROLE_TOOLBOX } from "./keys.ts";
import { cocoonSetOwnerName } from "./owner.ts";

/** The VM name of agent slot `slot` of a set (or deployment). */
export function vmNameForDeployment(namespace: string, deployment: string, slot: number): string {
  return `vk-${namespace}-${deployment}-${slot}`;
}

/** The VM name derived from a pod name. */
export function vmNameForPod(namespace: string, podName: string): string {
  return `vk-${namespace}-${podName}`;
}

/** "vk-<ns>-<set>-", the prefix shared by every agent VM name of a set. */
export function agentVMNamePrefix(namespace: string, cocoonSet: string): string {
  return `vk-${namespace}-${cocoonSet}-`;
}

/** The agent slot encoded in vmName for (namespace, cocoonSet), or -1 when it is not one. */
export function extractAgentSlot(namespace: string, cocoonSet: string, vmName: string): number {
  const prefix = agentVMNamePrefix(namespace, cocoonSet);
  if (!vmName.startsWith(prefix)) return -1;
  const suffix = vmName.slice(prefix.length);
  // strconv.Atoi syntax; a "-" was already excluded, so negative slots cannot occur.
  if (!/^\+?[0-9]+$/.test(suffix)) return -1;
  const n = BigInt(suffix);
  return n >= 1n << 63n ? -1 : Number(n);
}

/** main for slot 0, sub-agent for a positive slot, toolbox for a negative one. */
export function inferRoleFromAgentSlot(slot: number): string {
  if (slot < 0) return ROLE_TOOLBOX;
  return slot === 0 ? ROLE_MAIN : ROLE_SUB_AGENT;
}

/** The pod's role, from its CocoonSet owner and its VM name. */
export function roleForPod(pod: Pod, vmName: string): string {
  const cocoonSet = cocoonSetOwnerName(pod.metadata.ownerReferences);
  return inferRoleFromAgentSlot(extractAgentSlot(pod.metadata.namespace ?? "", cocoonSet, vmName));
}

/**
 * Every (namespace, rest) pair that `vk-<namespace>-<rest>` could have been built from: one per
 * dash after the prefix. `vk-team-x-prod-0` yields team / x-prod-0, team-x / prod-0 and
 * team-x-prod / 0, which is how two namespaces can end up sharing one VM name.
 */
export function vmNameSplits(vmName: string): { namespace: string; rest: string }[] {
  if (!vmName.startsWith("vk-")) return [];
  const body = vmName.slice(3);
  const out: { namespace: string; rest: string }[] = [];
  for (let i = body.indexOf("-"); i > 0; i = body.indexOf("-", i + 1)) {
    const namespace = body.slice(0, i);
    const rest = body.slice(i + 1);
    if (rest !== "") out.push({ namespace, rest });
  }
  return out;
}

/**
 * Whether a CocoonSet can own vmName by its own namespace and name: an agent slot
 * `vk-<ns>-<set>-<slot>`, or one of the named toolboxes `vk-<ns>-<set>-<toolbox>`.
 */
export function setDerivesVMName(
  namespace: string,
  cocoonSet: string,
  toolboxNames: Iterable<string>,
  vmName: string,
): boolean {
  if (extractAgentSlot(namespace, cocoonSet, vmName) >= 0) return true;
  for (const tb of toolboxNames) {
    if (vmName === vmNameForPod(namespace, `${cocoonSet}-${tb}`)) return true;
  }
  return false;
}
