/**
 * Step 1 of the gate (docs/cocoonset.md, "Snapshot safety"): the object a tag is deleted (or a VM
 * hibernated or woken) for, and whether it derives the VM name from its own namespace and names —
 * a CocoonSet its agent slots and toolboxes, a CocoonHibernation `vk-<ns>-<podRef.name>` — never
 * from an editable annotation alone.
 *
 * @module
 */
import { setDerivesVMName, vmNameForPod } from "../common/meta/mod.ts";

/** The object on whose behalf a tag is deleted (or a VM hibernated or woken). */
export type Actor =
  | {
    kind: "CocoonSet";
    namespace: string;
    name: string;
    uid?: string;
    /** Toolbox names of the set (spec and status): toolbox VMs are derived from them. */
    toolboxNames: readonly string[];
    /** The set's creationTimestamp: a set of another namespace created later is no claimant. */
    creationTimestamp?: string;
  }
  | {
    kind: "CocoonHibernation";
    namespace: string;
    name: string;
    uid?: string;
    /** The request's target pod (spec.podRef.name). */
    podName: string;
  };

/** Whether the actor can derive vmName from its own namespace and names. */
export function actorDerives(actor: Actor, vmName: string): boolean {
  if (actor.kind === "CocoonSet") {
    return setDerivesVMName(actor.namespace, actor.name, actor.toolboxNames, vmName);
  }
  return vmName === vmNameForPod(actor.namespace, actor.podName);
}

/** Whether actor is the object kind ns/name (its own claims are its own business). */
export function isActor(
  actor: Actor | undefined,
  kind: Actor["kind"],
  ns: string,
  name: string,
): boolean {
  return actor !== undefined && actor.kind === kind && actor.namespace === ns &&
    actor.name === name;
}

/** "Kind ns/name": how messages name the actor. */
export function actorRef(actor: Actor): string {
  return `${actor.kind} ${actor.namespace}/${actor.name}`;
}
