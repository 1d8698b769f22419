/**
 * Drift: whether a live pod still matches what the spec would build now, and the Main drift step.
 * Affinity, node and runtime annotations are never compared: migration and waking own them.
 */
import type { Pod } from "../kube/mod.ts";
import { emptyStringAbsent, sameJson } from "../common/k8s/same_json.ts";
import type {
  CocoonSet,
  QuantityValue,
  ToolboxSpec,
  VMResourceRequirements,
} from "../common/apis/v1/cocoonset_types.ts";
import { TOOLBOX_MODE_STATIC } from "../common/apis/v1/enums.ts";
import { parseQuantity } from "../common/k8s/quantity.ts";
import {
  DEFAULT_NODE_POOL,
  fromAgentSpec,
  fromToolboxSpec,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  parseVMRuntime,
  parseVMSpec,
  podNodePool,
  vmSpecEqual,
} from "../common/meta/mod.ts";
import { deletePod, GO_ON, podRef, type SetPass, type Step, stop } from "./pass.ts";
import { isPodFailed } from "./pods.ts";
import { checkSpec } from "./validate.ts";

/** The Main drift step: deletes a drifted main for the next pass, unless its shape is refused. */
export async function replaceDriftedMain(pass: SetPass): Promise<Step> {
  const main = pass.classified.main;
  if (!main || podSpecMatchesAgent(main, pass.cs, 0)) return GO_ON;
  if ((await checkSpec(pass)).main !== undefined) return GO_ON;
  pass.log.info("main agent {pod} drifted from the spec, deleting to recreate", {
    pod: podRef(main),
  });
  await deletePod(pass, main, "drifted main agent");
  return stop({ requeue: true });
}

/** Whether a live agent pod matches buildAgentPod now (keeping its VM name and a sub's fork). */
export function podSpecMatchesAgent(pod: Pod, cs: CocoonSet, slot: number): boolean {
  const agent = cs.spec.agent;
  const current = parseVMSpec(pod);
  const want = fromAgentSpec(
    agent,
    current.vmName,
    cs.spec.snapshotPolicy,
    slot > 0 ? current.forkFrom : "",
  );
  if (!vmSpecEqual(current, want) || !resourcesMatch(pod, agent.resources)) return false;
  // The API server fills an empty service account with "default".
  if ((pod.spec?.serviceAccountName || "default") !== (agent.serviceAccountName || "default")) {
    return false;
  }
  if (!sameList(pod.spec?.containers?.[0]?.envFrom, agent.envFrom)) return false;
  return schedulingMatches(pod, cs);
}

/** Whether a live toolbox pod still matches what buildToolboxPod would make now. */
export function podSpecMatchesToolbox(pod: Pod, cs: CocoonSet, tb: ToolboxSpec): boolean {
  const current = parseVMSpec(pod);
  const want = fromToolboxSpec(tb, current.vmName, cs.spec.snapshotPolicy);
  if (!vmSpecEqual(current, want) || !resourcesMatch(pod, tb.resources)) return false;
  if (!schedulingMatches(pod, cs)) return false;
  if (tb.mode === TOOLBOX_MODE_STATIC) {
    const got = parseVMRuntime(pod);
    if (
      got.vmID !== (tb.staticVMID ?? "") || got.ip !== (tb.staticIP ?? "") ||
      got.vncPort !== (tb.vncPort ?? 0)
    ) return false;
  }
  return true;
}

/**
 * CPU and memory by value, as far as the spec names them: a missing request is its limit, as the
 * server defaults it; one named neither way is left to a namespace LimitRange.
 */
function resourcesMatch(pod: Pod, want: VMResourceRequirements | undefined): boolean {
  const got = pod.spec?.containers?.[0]?.resources ?? {};
  for (const name of ["cpu", "memory"]) {
    const wantLimit = want?.limits?.[name];
    const wantRequest = want?.requests?.[name] ?? wantLimit;
    if (wantLimit !== undefined && !quantityEqual(got.limits?.[name], wantLimit)) return false;
    if (wantRequest !== undefined && !quantityEqual(got.requests?.[name], wantRequest)) {
      return false;
    }
  }
  return true;
}

function quantityEqual(a: QuantityValue | undefined, b: QuantityValue | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  try {
    return parseQuantity(a).cmp(parseQuantity(b)) === 0;
  } catch {
    return false; // unparsable: cannot be shown equal, so rebuilt from the spec
  }
}

/**
 * Pool and snapshot CPU class. A live pod without the class is adopted (node selectors are
 * immutable); a failed one is recreated with it.
 */
function schedulingMatches(pod: Pod, cs: CocoonSet): boolean {
  if (podNodePool(pod) !== (cs.spec.nodePool || DEFAULT_NODE_POOL)) return false;
  const cls = pod.spec?.nodeSelector?.[LABEL_SNAPSHOT_COMPATIBILITY_CLASS] ?? "";
  const want = cs.spec.snapshotCompatibilityClass ?? "";
  return cls === want || (cls === "" && !isPodFailed(pod));
}

/** Lists equal on the wire: absent is empty, and "" is absent (an envFrom `prefix: ""`). */
function sameList(a: readonly unknown[] | undefined, b: readonly unknown[] | undefined): boolean {
  if ((a?.length ?? 0) === 0 && (b?.length ?? 0) === 0) return true;
  return sameJson(a ?? [], b ?? [], emptyStringAbsent);
}
