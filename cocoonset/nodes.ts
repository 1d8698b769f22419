/**
 * What the node cache says about a set's placement: whether spec.nodeName's node fits the set's
 * pool and snapshot CPU class, and whether the pool has any node. Without the Go role's missing
 * list and watch on nodes (NodeChecks off) a named node is taken as given, as in the Go original.
 */
import { Nodes, type Pod } from "../kube/mod.ts";
import { CONDITION_TYPE_PROGRESSING } from "../common/apis/v1/conditions.ts";
import {
  DEFAULT_NODE_POOL,
  LABEL_NODE_POOL,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
} from "../common/meta/mod.ts";
import { doing, emit, podRef, readStored, type SetPass } from "./pass.ts";
import { unschedulableMessage } from "./predicate.ts";

/** Warning and Progressing=False reason: spec.nodeName's node cannot take the main. */
export const REASON_MIGRATION_TARGET_UNKNOWN = "MigrationTargetUnknown";
/** Warning reason: the main is Unschedulable and no node carries the set's pool label. */
export const REASON_NO_NODES_IN_POOL = "NoNodesInPool";

/** Whether the operator's role lets it read nodes now, and a way to hear when it does. */
export interface NodeChecks {
  enabled(): boolean;
  /** Runs fn once when the checks turn on after being off. */
  onEnabled(fn: () => void): void;
}

/** Why node `name` cannot take cs's main, or "" when it can (or the checks are off). */
export async function migrationTargetProblem(pass: SetPass, name: string): Promise<string> {
  const { cs, deps } = pass;
  if (!deps.nodeChecks()) return "";
  const pool = cs.spec.nodePool || DEFAULT_NODE_POOL;
  const node = await readStored(pass, Nodes, { metadata: { name } }, "read node", deps.client);
  if (!node) return `no node ${name} in pool ${pool}`;
  const labels = node.metadata.labels ?? {};
  const nodePool = labels[LABEL_NODE_POOL] ?? "";
  if (nodePool !== pool) {
    return `node ${name} is in pool ${nodePool || "(none)"}, not in the set's pool ${pool}`;
  }
  const cls = cs.spec.snapshotCompatibilityClass ?? "";
  const nodeClass = labels[LABEL_SNAPSHOT_COMPATIBILITY_CLASS] ?? "";
  if (cls !== "" && nodeClass !== cls) {
    return `node ${name} has snapshot CPU class ${nodeClass || "(none)"}, ` +
      `not the set's class ${cls}`;
  }
  return "";
}

/** Records that the main is not moved toward spec.nodeName: a Warning and Progressing=False. */
export function reportUnknownTarget(pass: SetPass, problem: string): void {
  const message = `spec.nodeName: ${problem}; nothing is moved toward it`;
  emit(pass, "Warning", REASON_MIGRATION_TARGET_UNKNOWN, message);
  const reason = REASON_MIGRATION_TARGET_UNKNOWN;
  pass.problems.push({ condition: CONDITION_TYPE_PROGRESSING, reason, message });
}

/**
 * Emits NoNodesInPool when pod is Unschedulable and no node carries the set's pool label, which
 * the scheduler's "0/3 nodes are available" does not say.
 */
export async function warnIfPoolEmpty(pass: SetPass, pod: Pod): Promise<void> {
  if (unschedulableMessage(pod) === "" || !pass.deps.nodeChecks()) return;
  const pool = pass.cs.spec.nodePool || DEFAULT_NODE_POOL;
  const nodes = await doing(
    `list nodes of pool ${pool}`,
    pass.deps.client.list(Nodes, {
      labelSelector: { [LABEL_NODE_POOL]: pool },
      unsafeDisableDeepCopy: true,
      signal: pass.signal,
    }),
  );
  if (nodes.items.length > 0) return;
  emit(
    pass,
    "Warning",
    REASON_NO_NODES_IN_POOL,
    `no node carries ${LABEL_NODE_POOL}=${pool}: pod ${podRef(pod)} stays Unschedulable until ` +
      `one joins the pool`,
  );
}
