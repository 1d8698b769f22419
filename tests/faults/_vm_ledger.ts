/**
 * "No two VMs run for one VM name", judged from the simulator's events: a VM is up from its
 * `ready` until it hibernates, its pod fails or its pod is finalized. A `ready` for a VM name
 * that is already up — whether from another pod or from a new pod of the same name while the
 * old one's VM still ran — is a violation.
 *
 * @module
 */
import type { NumberedSimEvent } from "../../sim/events.ts";

/** One VM name running twice. */
export interface VmViolation {
  vm: string;
  at: number;
  what: string;
}

/** The outcome, with the number of VM starts seen for the figure. */
export interface VmVerdict {
  violations: VmViolation[];
  starts: number;
  assertNone(): void;
}

/** Judges the events (in the simulator's order). */
export function judgeVmUniqueness(events: readonly NumberedSimEvent[]): VmVerdict {
  /** vm name → the pod (ns/name) whose VM is up. */
  const up = new Map<string, string>();
  const violations: VmViolation[] = [];
  let starts = 0;
  for (const e of events) {
    const vm = e.vmName;
    if (!vm) continue;
    const pod = `${e.namespace}/${e.name}`;
    if (e.type === "ready") {
      starts++;
      const other = up.get(vm);
      if (other !== undefined) {
        violations.push({
          vm,
          at: e.at,
          what: `VM ${vm} came up for ${pod} (event ${e.seq}) while it was already up for ${other}`,
        });
      }
      up.set(vm, pod);
    } else if (e.type === "hibernated" || e.type === "finalized" || e.type === "failed") {
      if (up.get(vm) === pod) up.delete(vm);
    }
  }
  return {
    violations,
    starts,
    assertNone() {
      if (violations.length === 0) return;
      const lines = violations.map((v) => `  ${new Date(v.at).toISOString()} ${v.what}`);
      throw new Error(`a VM name ran twice:\n${lines.join("\n")}`);
    },
  };
}
