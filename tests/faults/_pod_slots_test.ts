import assert from "node:assert/strict";
import { LABEL_COCOON_SET, LABEL_ROLE, LABEL_SLOT } from "../../common/meta/keys.ts";
import type { Pod } from "../../kube/core.ts";
import type { Observation } from "./_observer.ts";
import { SlotLedger, slotOf } from "./_pod_slots.ts";

function pod(name: string, uid: string, slot: string, terminating = false): Pod {
  return {
    metadata: {
      name,
      namespace: "ns",
      uid,
      labels: { [LABEL_COCOON_SET]: "demo", [LABEL_ROLE]: "sub-agent", [LABEL_SLOT]: slot },
      ...(terminating ? { deletionTimestamp: "2026-05-14T00:00:00Z" } : {}),
    },
  };
}

function seen(type: Observation<Pod>["type"], object: Pod): Observation<Pod> {
  return { type, object, at: 0, relist: false };
}

Deno.test("pod slots: a slot is keyed by set, role and slot label", () => {
  assert.equal(slotOf(pod("demo-1", "u", "1")), "ns/demo/sub-agent/1");
  assert.equal(slotOf({ metadata: { name: "other", namespace: "ns" } }), undefined);
});

Deno.test("pod slots: a replacement after the old pod terminates is fine", () => {
  const ledger = new SlotLedger();
  ledger.observe(seen("ADDED", pod("demo-1", "a", "1")));
  ledger.observe(seen("MODIFIED", pod("demo-1", "a", "1", true)));
  ledger.observe(seen("ADDED", pod("demo-1", "b", "1")));
  ledger.observe(seen("DELETED", pod("demo-1", "a", "1", true)));
  assert.deepEqual(ledger.violations, []);
  assert.equal(ledger.podsSeen, 2);
  ledger.assertNone();
});

Deno.test("pod slots: a second live pod for a slot is a violation, whatever its name", () => {
  const ledger = new SlotLedger();
  ledger.observe(seen("ADDED", pod("demo-1", "a", "1")));
  ledger.observe(seen("ADDED", pod("demo-1-copy", "b", "1")));
  assert.equal(ledger.violations.length, 1);
  assert.throws(() => ledger.assertNone(), /demo-1-copy .* became live while demo-1/);
});

Deno.test("pod slots: a pod relabelled to another slot frees its old one", () => {
  const ledger = new SlotLedger();
  ledger.observe(seen("ADDED", pod("demo-1", "a", "1")));
  ledger.observe(seen("MODIFIED", pod("demo-1", "a", "2")));
  ledger.observe(seen("ADDED", pod("demo-1b", "b", "1")));
  assert.deepEqual(ledger.violations, []);
});
