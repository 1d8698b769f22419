import assert from "node:assert/strict";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import type { SnapshotPolicy } from "../common/apis/v1/enums.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_LIFECYCLE_STATE,
  ANNOTATION_RESTORE_FROM_HIBERNATE,
  ANNOTATION_SNAPSHOT_POLICY,
} from "../common/meta/mod.ts";
import { buildAgentPod } from "./pods.ts";
import {
  addToLedger,
  ANNOTATION_SNAPSHOT_LEDGER,
  encodeLedger,
  EVERY_VM,
  hibernatedVMsOf,
  podSnapshotPolicy,
  readLedger,
  type SnapshotLedger,
  startLedger,
  teardownTags,
} from "./snapshot_ledger.ts";
import { newCocoonSet } from "./_test_support.ts";

function withLedger(raw: string | undefined, policy?: SnapshotPolicy): CocoonSet {
  return newCocoonSet("demo", (cs) => {
    if (policy) cs.spec.snapshotPolicy = policy;
    if (raw !== undefined) cs.metadata.annotations = { [ANNOTATION_SNAPSHOT_LEDGER]: raw };
  });
}

Deno.test("ledger: encode and read round-trip in canonical order; absent or unreadable is unknown", async (t) => {
  const l: SnapshotLedger = { policies: ["never", "always", "never"], hibernated: ["b", "a"] };
  const raw = encodeLedger(l);
  assert.equal(raw, '{"policies":["always","never"],"hibernated":["a","b"]}');
  assert.deepEqual(readLedger(withLedger(raw)), {
    policies: ["always", "never"],
    hibernated: ["a", "b"],
  });
  for (
    const [name, bad] of [
      ["absent", undefined],
      ["not JSON", "{"],
      ["not an object", "3"],
      ["unknown policy", '{"policies":["sometimes"],"hibernated":[]}'],
      ["hibernated not a list", '{"policies":["never"],"hibernated":"*"}'],
    ] as const
  ) {
    await t.step(name, () => assert.equal(readLedger(withLedger(bad)), undefined));
  }
});

Deno.test("ledger: a new set starts with its defaulted policy; a set reconciled before stays unknown", () => {
  const fresh = newCocoonSet("demo");
  startLedger(fresh);
  assert.deepEqual(readLedger(fresh), { policies: ["always"], hibernated: [] });

  const never = newCocoonSet("demo", (cs) => cs.spec.snapshotPolicy = "never");
  startLedger(never);
  assert.deepEqual(readLedger(never), { policies: ["never"], hibernated: [] });

  const old = newCocoonSet("demo", (cs) => cs.status = { observedGeneration: 1, phase: "Running" });
  startLedger(old);
  assert.equal(old.metadata.annotations?.[ANNOTATION_SNAPSHOT_LEDGER], undefined);

  const kept = withLedger('{"policies":["always","never"],"hibernated":["x"]}', "never");
  startLedger(kept);
  assert.deepEqual(readLedger(kept), { policies: ["always", "never"], hibernated: ["x"] });
});

Deno.test("ledger: additions only grow it, and * absorbs single VMs", () => {
  const l: SnapshotLedger = { policies: ["never"], hibernated: [] };
  assert.equal(addToLedger(l, { policies: ["never"], hibernated: [] }), undefined, "nothing new");
  assert.deepEqual(addToLedger(l, { policies: ["always"], hibernated: ["vk-ns-demo-0", ""] }), {
    policies: ["always", "never"],
    hibernated: ["vk-ns-demo-0"],
  });
  const all = addToLedger(l, { hibernated: [EVERY_VM] })!;
  assert.deepEqual(all.hibernated, [EVERY_VM]);
  assert.equal(addToLedger(all, { hibernated: ["vk-ns-demo-3"] }), undefined);
});

Deno.test("ledger: hibernate evidence is a request, a hibernating or hibernated VM, or a restore", async (t) => {
  const cs = newCocoonSet("demo");
  const cases: [string, Record<string, string>, boolean][] = [
    ["nothing", {}, false],
    ["hibernate request", { [ANNOTATION_HIBERNATE]: "true" }, true],
    ["hibernating", { [ANNOTATION_LIFECYCLE_STATE]: "hibernating" }, true],
    ["hibernated", { [ANNOTATION_LIFECYCLE_STATE]: "hibernated" }, true],
    ["restore from :hibernate", { [ANNOTATION_RESTORE_FROM_HIBERNATE]: "true" }, true],
    ["ready", { [ANNOTATION_LIFECYCLE_STATE]: "ready" }, false],
  ];
  for (const [name, annotations, want] of cases) {
    await t.step(name, () => {
      const pod = buildAgentPod(cs, 1, "vk-ns-demo-0", "node-a");
      pod.metadata.annotations = { ...pod.metadata.annotations, ...annotations };
      assert.deepEqual(hibernatedVMsOf([pod]), want ? ["vk-ns-demo-1"] : []);
    });
  }
});

Deno.test("teardownTags: only tags the ledger says may exist and the policy does not keep", async (t) => {
  const cases: {
    name: string;
    policy: SnapshotPolicy;
    ledger?: SnapshotLedger;
    want: Record<string, string[]>;
  }[] = [
    {
      name: "unknown ledger, never: both tags of every VM (the Go operator's teardown)",
      policy: "never",
      want: {
        "vk-ns-demo-0": ["hibernate", "latest"],
        "vk-ns-demo-1": ["hibernate", "latest"],
      },
    },
    {
      name: "unknown ledger, always: :hibernate of every VM, :latest kept",
      policy: "always",
      want: { "vk-ns-demo-0": ["hibernate"], "vk-ns-demo-1": ["hibernate"] },
    },
    {
      name: "always since creation, never hibernated: nothing",
      policy: "always",
      ledger: { policies: ["always"], hibernated: [] },
      want: { "vk-ns-demo-0": [], "vk-ns-demo-1": [] },
    },
    {
      name: "never since creation, never hibernated: nothing (no VM ever pushed)",
      policy: "never",
      ledger: { policies: ["never"], hibernated: [] },
      want: { "vk-ns-demo-0": [], "vk-ns-demo-1": [] },
    },
    {
      name: "never since creation, main migrated: the main's :hibernate only",
      policy: "never",
      ledger: { policies: ["never"], hibernated: ["vk-ns-demo-0"] },
      want: { "vk-ns-demo-0": ["hibernate"], "vk-ns-demo-1": [] },
    },
    {
      name: "never now, always before: every VM's :latest",
      policy: "never",
      ledger: { policies: ["always", "never"], hibernated: [] },
      want: { "vk-ns-demo-0": ["latest"], "vk-ns-demo-1": ["latest"] },
    },
    {
      name: "never now, main-only before: the main's :latest only",
      policy: "never",
      ledger: { policies: ["main-only", "never"], hibernated: [] },
      want: { "vk-ns-demo-0": ["latest"], "vk-ns-demo-1": [] },
    },
    {
      name: "main-only now, always before, suspended once: sub-agent :latest and every :hibernate",
      policy: "main-only",
      ledger: { policies: ["always", "main-only"], hibernated: [EVERY_VM] },
      want: { "vk-ns-demo-0": ["hibernate"], "vk-ns-demo-1": ["hibernate", "latest"] },
    },
    {
      name: "main-only since creation: a toolbox ending in -0 may have :latest (vk-cocoon's rule)",
      policy: "main-only",
      ledger: { policies: ["main-only"], hibernated: [] },
      want: { "vk-ns-demo-0": [], "vk-ns-demo-1": [], "vk-ns-demo-db-0": ["latest"] },
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const cs = newCocoonSet("demo", (s) => s.spec.snapshotPolicy = c.policy);
      const got = Object.fromEntries(
        Object.keys(c.want).map((vm) => [vm, teardownTags(cs, c.ledger, vm)]),
      );
      assert.deepEqual(got, c.want);
    });
  }
});

Deno.test("ledger: a pod's policy is what vk-cocoon reads from its annotation (absent or unknown snapshots every VM)", async (t) => {
  const cs = newCocoonSet("demo");
  const cases: [string, string | undefined, SnapshotPolicy][] = [
    ["never", "never", "never"],
    ["main-only", "main-only", "main-only"],
    ["always", "always", "always"],
    ["absent", undefined, "always"],
    ["unknown", "sometimes", "always"],
  ];
  for (const [name, annotation, want] of cases) {
    await t.step(name, () => {
      const pod = buildAgentPod(cs, 0);
      if (annotation === undefined) delete pod.metadata.annotations![ANNOTATION_SNAPSHOT_POLICY];
      else pod.metadata.annotations![ANNOTATION_SNAPSHOT_POLICY] = annotation;
      assert.equal(podSnapshotPolicy(pod), want);
    });
  }
});
