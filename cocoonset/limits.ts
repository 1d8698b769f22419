/**
 * Per-set bounds on `spec.agent.replicas` and `spec.toolboxes`: a set's status lists every pod
 * and must fit in one etcd object, and every pass walks the set's pods, so a set far above what a
 * process handles would stall it for every tenant. A part above its bound builds nothing and the
 * set says why (Ready=False `InvalidSpec`, a Warning naming the limit). The defaults are measured
 * in docs/configuration.md.
 */
import type { CocoonSetSpec } from "../common/apis/v1/cocoonset_types.ts";

/** The bounds of one set; both at least 0. */
export interface SetLimits {
  /** Largest `spec.agent.replicas` acted on (the main is not counted). */
  maxReplicas: number;
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
