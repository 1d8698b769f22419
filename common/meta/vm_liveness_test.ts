import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import {
  ANNOTATION_COCOON_SET_GENERATION,
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_OBSERVED_GENERATION,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_VMID,
} from "./keys.ts";
import {
  ANNOTATION_HIBERNATE_ASKED_VMID,
  recordHibernateAsk,
  vmHibernationConfirmed,
  vmLive,
  vmMayBeLeaving,
  vmUp,
  wakeBroughtVMBack,
} from "./vm_liveness.ts";

/** A pod with the given annotations and, when running, one running container. */
function pod(annotations: Record<string, string>, running: boolean): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "ns", annotations },
    spec: { containers: [{ name: "agent", image: "x" }] },
    status: running
      ? {
        phase: "Running",
        containerStatuses: [{
          name: "agent",
          ready: true,
          restartCount: 0,
          image: "x",
          imageID: "",
          state: { running: {} },
        }],
      }
      : { phase: "Pending" },
  };
}

Deno.test("vmUp / vmLive: what vk-cocoon shows while a VM runs, restores and hibernates", async (t) => {
  const cases: [string, Record<string, string>, boolean, boolean, boolean][] = [
    // name, annotations, container running, vmUp, vmLive
    [
      "running",
      { [ANNOTATION_VMID]: "v1", [ANNOTATION_LIFECYCLE_STATE]: "ready" },
      true,
      true,
      true,
    ],
    ["running, no lifecycle annotation", { [ANNOTATION_VMID]: "v1" }, true, true, true],
    ["container up before the restore wrote the id", {}, true, false, false],
    ["id but no running container", { [ANNOTATION_VMID]: "v1" }, false, false, false],
    [
      "hibernating: snapshot pushed, VM not yet removed",
      { [ANNOTATION_VMID]: "v1", [ANNOTATION_LIFECYCLE_STATE]: "hibernating" },
      true,
      true,
      false,
    ],
    ["hibernated: id cleared", { [ANNOTATION_LIFECYCLE_STATE]: "hibernated" }, true, false, false],
  ];
  for (const [name, annotations, running, up, live] of cases) {
    await t.step(name, () => {
      const p = pod(annotations, running);
      assert.equal(vmUp(p), up, "vmUp");
      assert.equal(vmLive(p), live, "vmLive");
    });
  }
});

Deno.test("vmHibernationConfirmed: one rule for both vk-cocoons (lifecycle pair, or the id cleared on a bound pod)", async (t) => {
  const bound = (annotations: Record<string, string>, node = "node-a"): Pod => {
    const p = pod(annotations, false);
    if (node) p.spec!.nodeName = node;
    return p;
  };
  const asked = { [ANNOTATION_HIBERNATE]: "true" };
  const pair = (state: string, observed: number) => ({
    [ANNOTATION_LIFECYCLE_STATE]: state,
    [ANNOTATION_LIFECYCLE_OBSERVED_GENERATION]: String(observed),
    [ANNOTATION_COCOON_SET_GENERATION]: "2",
  });
  const cases: [string, Pod, boolean][] = [
    ["silent: asked, id cleared, bound", bound(asked), true],
    [
      "silent: asked, id still there (pushed, not removed)",
      bound({ ...asked, [ANNOTATION_VMID]: "v" }),
      false,
    ],
    ["silent: asked, unbound (never had a VM)", bound(asked, ""), false],
    ["silent: not asked", bound({}), false],
    ["annotated: hibernated at the stamp", bound({ ...asked, ...pair("hibernated", 2) }), true],
    [
      "annotated: hibernated for an older round",
      bound({ ...asked, ...pair("hibernated", 1) }),
      false,
    ],
    ["annotated: hibernating, id cleared", bound({ ...asked, ...pair("hibernating", 2) }), false],
  ];
  for (const [name, p, want] of cases) {
    await t.step(name, () => assert.equal(vmHibernationConfirmed(p), want));
  }
  await t.step("a caller's generation outdates the pod's stamp", () => {
    assert.equal(vmHibernationConfirmed(bound({ ...asked, ...pair("hibernated", 2) }), 3), false);
  });
});

Deno.test("wakeBroughtVMBack: a live VM counts as woken only for a waker that saw it down", () => {
  const live = pod({ [ANNOTATION_VMID]: "vm-1" }, true);
  // vk-cocoon of today between push and removal: the old VM shows live, nothing else changed.
  assert.equal(wakeBroughtVMBack(live, false), false);
  assert.equal(wakeBroughtVMBack(live, true), true);
  assert.equal(wakeBroughtVMBack(pod({}, true), true), false, "restore not done yet");
});

Deno.test("vmMayBeLeaving: the VM asked to hibernate last, until a new VM id shows", () => {
  const asked = pod({ [ANNOTATION_VMID]: "vm-1" }, true);
  assert.equal(vmMayBeLeaving(asked), false, "never asked");
  recordHibernateAsk(asked);
  assert.equal(asked.metadata.annotations?.[ANNOTATION_HIBERNATE_ASKED_VMID], "vm-1");
  assert.equal(vmMayBeLeaving(asked), true, "pushed and about to be removed, for all it shows");
  asked.metadata.annotations![ANNOTATION_VMID] = "vm-2";
  assert.equal(vmMayBeLeaving(asked), false, "restored: a new VM");
  const down = pod({}, false);
  recordHibernateAsk(down);
  assert.equal(down.metadata.annotations?.[ANNOTATION_HIBERNATE_ASKED_VMID], undefined);
});
