/**
 * Which node events reach which CocoonSets: a set pinned by spec.nodeName to a node that does
 * not exist or does not fit (nodes.ts) waits for that node, so the node's arrival, departure or
 * relabelling must wake exactly the sets naming it.
 *
 * CocoonSets are filed in the cache under their spec.nodeName (an index, like the
 * CocoonHibernations' podRef index) rather than found by scanning every set on each node event:
 * the index costs one entry per pinned set, and the handler's work follows the sets that name the
 * node, not the number of sets in the cluster. Only node creation, deletion and label changes
 * pass: status heartbeats, which every node sends every few seconds, never reach the queue.
 *
 * @module
 */
import { type CompletePredicate, labelChanged, type Node, type Request } from "../kube/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";

/** Cache index of CocoonSets by the node spec.nodeName pins their main to. */
export const NODE_NAME_INDEX = "spec.nodeName";

/** The index values of a set: its spec.nodeName, none when unpinned. */
export function nodeNameIndexValues(cs: CocoonSet): string[] {
  return cs.spec?.nodeName ? [cs.spec.nodeName] : [];
}

/** Looks up stored sets under an index value (the informer's byIndex). */
export type SetIndexLookup = (index: string, value: string) => CocoonSet[];

/** Requests for every CocoonSet whose spec.nodeName names node. */
export function setsTargetingNode(lookup: SetIndexLookup, node: Node): Request[] {
  return lookup(NODE_NAME_INDEX, node.metadata.name ?? "").map((cs) => ({
    namespace: cs.metadata.namespace ?? "",
    name: cs.metadata.name ?? "",
  }));
}

/** Node events that can change whether a node fits a set: create, delete, label changes. */
export function nodePlacementEvents(): CompletePredicate<Node> {
  const labels = labelChanged<Node>();
  return {
    create: () => true,
    delete: () => true,
    update: (oldNode, newNode) => labels.update(oldNode, newNode),
    generic: () => false,
  };
}
