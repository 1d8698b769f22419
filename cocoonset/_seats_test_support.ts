/**
 * Fixtures of the seat tests (release suspend, released-seat wake, migration, their crash
 * replay), on top of _test_support.ts: the set `ns/demo` at generation 1, its main pod in the
 * states vk-cocoon publishes and the writes the fake API received. Private to this folder's
 * tests.
 *
 * @module
 */
import type { Pod } from "../kube/mod.ts";
import type { FakeAction, FakeClient } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { applyVMRuntime, vmNameForDeployment } from "../common/meta/mod.ts";
import { buildAgentPod } from "./pods.ts";
import { lifecycleHibernated, newCocoonSet, TEST_NAMESPACE } from "./_test_support.ts";

/** Name of the seat tests' CocoonSet. */
export const SEAT_SET_NAME = "demo";
/** VM name of its main agent (slot 0): the repository its `:hibernate` tag lives in. */
export const mainVMName = vmNameForDeployment(TEST_NAMESPACE, SEAT_SET_NAME, 0);

/**
 * The set `ns/demo` at generation 1 (what the Go tests' fixtures carry, so the lifecycle echo of
 * a hibernated pod matches it), modified by mods.
 */
export function seatSet(...mods: ((cs: CocoonSet) => void)[]): CocoonSet {
  return newCocoonSet(SEAT_SET_NAME, (cs) => {
    cs.metadata.generation = 1;
  }, ...mods);
}

/** Where a fixture main pod runs and whether its VM is up. */
export interface MainPodState {
  /** spec.nodeName; absent leaves the pod unscheduled. */
  node?: string;
  /** vm.cocoonstack.io/id; absent means vk-cocoon has not (re)started the VM. */
  vmID?: string;
  /** Whether the container reports running. */
  running?: boolean;
}

/** The main agent pod of cs in the given state (no status unless running). */
export function mainPod(cs: CocoonSet, state: MainPodState = {}): Pod {
  const pod = buildAgentPod(cs, 0);
  if (state.node) pod.spec!.nodeName = state.node;
  if (state.vmID) applyVMRuntime({ vmID: state.vmID, ip: "", vncPort: 0 }, pod);
  if (state.running) {
    pod.status = {
      phase: "Running",
      containerStatuses: [{
        name: "agent",
        ready: true,
        restartCount: 0,
        image: "x",
        imageID: "x",
        state: { running: {} },
      }],
    };
  }
  return pod;
}

/**
 * The main pod as vk-cocoon leaves it after a completed hibernate: bound to node, lifecycle
 * `hibernated` at the set's generation, no VM id.
 */
export function hibernatedMainPod(cs: CocoonSet, node: string): Pod {
  return lifecycleHibernated(mainPod(cs, { node }));
}

const writeVerbs: ReadonlySet<string> = new Set(["create", "update", "patch", "delete"]);

/** The writes the fake API received, in order; dry runs store nothing and are left out. */
export function writeActions(fake: FakeClient): FakeAction[] {
  return fake.actions.filter((a) => writeVerbs.has(a.verb) && !a.dryRun);
}
