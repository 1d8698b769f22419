/**
 * The simulated scheduler's decision for one pod, as a pure function: which nodes pass the
 * filters the default kube-scheduler profile would apply here (NodeUnschedulable,
 * TaintToleration, NodeAffinity incl. nodeSelector, and the pod count of NodeResourcesFit), and
 * among those the best by preferred node affinity. When nothing fits, the reason reads like the
 * real scheduler's FitError so tests and operators see the familiar text:
 * `0/3 nodes are available: 1 Too many pods, 2 node(s) didn't match Pod's node affinity/selector.
 * preemption: ...`.
 *
 * Deliberate simplifications: only the pod count is a resource (no CPU / memory fit), ties
 * between equally preferred nodes go to the node with the most free seats then to the first
 * name (the real scheduler adds resource scores and picks at random), and preemption is never
 * attempted (its message part is still produced).
 *
 * @module
 */
import type {
  NodeSelectorRequirement,
  NodeSelectorTerm,
  Pod,
  Taint,
  Toleration,
} from "../kube/core.ts";

/** What the scheduler knows about one node when it places a pod. */
export interface NodeView {
  name: string;
  labels: Record<string, string>;
  taints: Taint[];
  /** spec.unschedulable (cordoned). */
  unschedulable: boolean;
  /** Pods the node admits (status.allocatable.pods). */
  seats: number;
  /** Non-terminated pods bound (or being bound) to the node, terminating ones included. */
  used: number;
}

/** The decision: a node, or the Unschedulable message. */
export type Placement = { node: string } | { unschedulable: string };

const REASON_UNSCHEDULABLE = "node(s) were unschedulable";
const REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector";
const REASON_TOO_MANY_PODS = "Too many pods";
const PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling";
const PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod";
const UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable";

/** Whether one toleration tolerates one taint (Kubernetes' ToleratesTaint). */
function toleratesTaint(t: Toleration, taint: Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  // An empty key with Exists tolerates everything.
  if (t.operator === "Exists") return true;
  return (t.value ?? "") === (taint.value ?? "");
}

/** Whether the tolerations cover the taint. */
export function tolerates(tolerations: Toleration[] | undefined, taint: Taint): boolean {
  return (tolerations ?? []).some((t) => toleratesTaint(t, taint));
}

/** The first NoSchedule / NoExecute taint of the node the pod does not tolerate. */
function untoleratedTaint(pod: Pod, node: NodeView): Taint | undefined {
  return node.taints.find((taint) =>
    (taint.effect === "NoSchedule" || taint.effect === "NoExecute") &&
    !tolerates(pod.spec?.tolerations, taint)
  );
}

function matchesRequirement(
  r: NodeSelectorRequirement,
  get: (key: string) => string | undefined,
): boolean {
  const value = get(r.key);
  const values = r.values ?? [];
  switch (r.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      if (value === undefined || values.length !== 1) return false;
      const have = Number.parseInt(value, 10);
      const want = Number.parseInt(values[0], 10);
      if (Number.isNaN(have) || Number.isNaN(want)) return false;
      return r.operator === "Gt" ? have > want : have < want;
    }
    default:
      return false;
  }
}

/**
 * Whether a node selector term matches the node: every label expression and every field
 * expression (only `metadata.name` exists for nodes) holds. An empty term matches nothing, as
 * in Kubernetes.
 */
function matchesTerm(term: NodeSelectorTerm, node: NodeView): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (exprs.length === 0 && fields.length === 0) return false;
  return exprs.every((r) => matchesRequirement(r, (k) => node.labels[k])) &&
    fields.every((r) =>
      matchesRequirement(r, (k) => (k === "metadata.name" ? node.name : undefined))
    );
}

/** nodeSelector and required node affinity (terms ORed) both hold. */
function matchesNodeAffinity(pod: Pod, node: NodeView): boolean {
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
    if (node.labels[k] !== v) return false;
  }
  const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  return required.nodeSelectorTerms.some((term) => matchesTerm(term, node));
}

/** Sum of the weights of the preferred node affinity terms the node matches. */
function preferenceScore(pod: Pod, node: NodeView): number {
  const preferred = pod.spec?.affinity?.nodeAffinity
    ?.preferredDuringSchedulingIgnoredDuringExecution;
  let score = 0;
  for (const p of preferred ?? []) if (matchesTerm(p.preference, node)) score += p.weight;
  return score;
}

/** Why a node is rejected, or undefined when the pod fits; filters run in the default order. */
function filterNode(pod: Pod, node: NodeView): string | undefined {
  if (
    node.unschedulable &&
    !tolerates(pod.spec?.tolerations, { key: UNSCHEDULABLE_TAINT, effect: "NoSchedule" })
  ) {
    return REASON_UNSCHEDULABLE;
  }
  const taint = untoleratedTaint(pod, node);
  if (taint) return `node(s) had untolerated taint {${taint.key}: ${taint.value ?? ""}}`;
  if (!matchesNodeAffinity(pod, node)) return REASON_AFFINITY;
  if (node.used >= node.seats) return REASON_TOO_MANY_PODS;
  return undefined;
}

function histogram(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([r, n]) => `${n} ${r}`).sort().join(", ");
}

/**
 * The Unschedulable message for per-node rejection reasons, in the real scheduler's format
 * (reasons counted and sorted, then the preemption post-filter's verdict).
 */
export function unschedulableMessage(reasons: string[]): string {
  if (reasons.length === 0) return "no nodes available to schedule pods";
  const n = reasons.length;
  const preemption = reasons.map((r) =>
    r === REASON_TOO_MANY_PODS ? PREEMPTION_NO_VICTIMS : PREEMPTION_NOT_HELPFUL
  );
  return `0/${n} nodes are available: ${histogram(reasons)}. ` +
    `preemption: 0/${n} nodes are available: ${histogram(preemption)}.`;
}

/** Places the pod on the best node that passes every filter, or explains why none does. */
export function place(pod: Pod, nodes: NodeView[]): Placement {
  const reasons: string[] = [];
  let best: { node: NodeView; score: number } | undefined;
  for (const node of nodes) {
    const reason = filterNode(pod, node);
    if (reason) {
      reasons.push(reason);
      continue;
    }
    const score = preferenceScore(pod, node);
    if (!best || better({ node, score }, best)) best = { node, score };
  }
  return best ? { node: best.node.name } : { unschedulable: unschedulableMessage(reasons) };
}

function better(
  a: { node: NodeView; score: number },
  b: { node: NodeView; score: number },
): boolean {
  if (a.score !== b.score) return a.score > b.score;
  const freeA = a.node.seats - a.node.used;
  const freeB = b.node.seats - b.node.used;
  if (freeA !== freeB) return freeA > freeB;
  return a.node.name < b.node.name;
}
