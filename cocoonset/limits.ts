/**
 * Per-set bounds: how many sub-agents (`spec.agent.replicas`) and toolboxes one CocoonSet may ask
 * for. The CRD lets replicas reach 2^31-1; a set's status lists every pod and must fit in one etcd
 * object (1.5 MiB), and every pass walks the set's pods, so one set far above what a process
 * handles would stall or exhaust it for every tenant. A part of the spec above its limit builds
 * nothing (no pod of that part is created, deleted or replaced) and the set says why:
 * Ready=False `InvalidSpec` and a Warning naming the limit and how to change it.
 *
 * The defaults come from a measurement (docs/configuration.md): a 1 000-replica set converges on
 * the real control plane with the operator well inside its memory limit, and its status is about
 * a sixth of etcd's object limit.
 */
import type { CocoonSetSpec } from "../common/apis/v1/cocoonset_types.ts";

/** The bounds of one set; both at least 0. */
export interface SetLimits {
  /** Largest `spec.agent.replicas` acted on (sub-agents; the main is not counted). */
  maxReplicas: number;
  /** Largest number of `spec.toolboxes` entries acted on. */
  maxToolboxes: number;
}

/** The defaults (--max-replicas-per-set, --max-toolboxes-per-set). */
export const DEFAULT_SET_LIMITS: SetLimits = { maxReplicas: 1_000, maxToolboxes: 100 };

/** The parts of a spec above their limit, each with the message the set reports. */
export interface OverLimit {
  agents?: string;
  toolboxes?: string;
}

/** Which parts of spec exceed limits; an empty object when none does. */
export function overLimit(spec: CocoonSetSpec, limits: SetLimits): OverLimit {
  const out: OverLimit = {};
  const replicas = spec.agent.replicas ?? 0;
  if (replicas > limits.maxReplicas) {
    out.agents = `spec.agent.replicas ${replicas} is above the limit of ${limits.maxReplicas} ` +
      "sub-agents per set (--max-replicas-per-set, MAX_REPLICAS_PER_SET); " +
      "no sub-agent is created or deleted";
  }
  const toolboxes = spec.toolboxes?.length ?? 0;
  if (toolboxes > limits.maxToolboxes) {
    out.toolboxes = `spec.toolboxes lists ${toolboxes} toolboxes, above the limit of ` +
      `${limits.maxToolboxes} per set (--max-toolboxes-per-set, MAX_TOOLBOXES_PER_SET); ` +
      "no toolbox is created or deleted";
  }
  return out;
}
