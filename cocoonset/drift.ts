/**
 * Drift: when a live pod no longer matches what the spec would build now (pods.ts builds them),
 * and the main-drift step of a pass, which replaces a drifted main only once its new shape
 * passes the spec check.
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

/**
 * The main-drift step: a main that no longer matches the spec is deleted (the next pass
 * recreates it), but never for a shape the server would refuse: then it keeps running and the
 * other parts of the set still reconcile.
 */
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

/**
 * Whether a live agent pod still matches what buildAgentPod would make from the spec now. The
 * VM name is taken from the pod; a sub-agent keeps whatever fork-from it has, while a main must
 * have none (so a manual fork-from on the main counts as drift). Affinity, node name and the
 * runtime annotations are not compared: migration and waking own those.
 */
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
 * CPU and memory by value, as far as the spec names them. ephemeral-storage is left out (it
 * comes from storage, and defaulting copies it around). A request the spec leaves out is compared
 * with its limit: the server defaults each missing request to the limit of that resource, also
 * when other requests are set. A value the spec names neither way is not compared at all: a
 * namespace's LimitRange fills it in at admission (a default limit, a default request), and
 * comparing it with "none" would replace the pod on every pass, forever. The price: removing a
 * limit or request from the spec alone is not drift; the pods pick it up when they are next made.
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
    // An unparsable value on either side cannot be shown equal: rebuild from the spec.
    return false;
  }
}

/**
 * Pool and snapshot CPU class. A live pod created before the class selector existed has none and
 * is adopted (node selectors are immutable; it gets the class when next recreated); a terminal
 * one is recreated with it.
 */
function schedulingMatches(pod: Pod, cs: CocoonSet): boolean {
  if (podNodePool(pod) !== (cs.spec.nodePool || DEFAULT_NODE_POOL)) return false;
  const cls = pod.spec?.nodeSelector?.[LABEL_SNAPSHOT_COMPATIBILITY_CLASS] ?? "";
  const want = cs.spec.snapshotCompatibilityClass ?? "";
  return cls === want || (cls === "" && !isPodFailed(pod));
}

/**
 * Semantic equality of two lists where absent and empty are the same, and so are an empty
 * string and a missing one: the server's encoder leaves empty strings out of a pod (an envFrom
 * `prefix: ""` from the spec is gone from the stored pod), where Go's typed comparison sees ""
 * on both sides.
 */
function sameList(a: readonly unknown[] | undefined, b: readonly unknown[] | undefined): boolean {
  if ((a?.length ?? 0) === 0 && (b?.length ?? 0) === 0) return true;
  return sameJson(a ?? [], b ?? [], emptyStringAbsent);
}
