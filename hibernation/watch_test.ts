import assert from "node:assert/strict";
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import type { Pod } from "../kube/mod.ts";
import { request, vmPod } from "./_fixtures.ts";
import {
  hibernationsTargetingPod,
  POD_REF_INDEX,
  podRefIndexValues,
  targetPodEvents,
} from "./watch.ts";

Deno.test("a pod maps to every request naming it in its own namespace", () => {
  const stored: CocoonHibernation[] = [
    request("a", "Hibernate"),
    request("b", "Wake"),
    { ...request("c", "Hibernate"), metadata: { name: "c", namespace: "other" } },
    request("d", "Hibernate", { pod: "demo-1" }),
  ];
  const lookup = (index: string, value: string) => {
    assert.equal(index, POD_REF_INDEX);
    return stored.filter((h) => podRefIndexValues(h).includes(value));
  };
  assert.deepEqual(hibernationsTargetingPod(lookup, vmPod()), [
    { namespace: "ns", name: "a" },
    { namespace: "ns", name: "b" },
  ]);
  assert.deepEqual(hibernationsTargetingPod(lookup, vmPod({ name: "demo-9" })), []);
});

Deno.test("pod events: every create, delete and update passes, status-only updates included", () => {
  // The Go operator's filter is "annotation changed OR Funcs{create, delete}", and a Funcs with
  // no Update/Generic allows them: vk-cocoon reports the running container (the last signal of
  // a wake) in a status-only update, after the VM id annotation.
  const p = targetPodEvents();
  const before = vmPod();
  const annotated: Pod = structuredClone(before);
  annotated.metadata.annotations!["vm.cocoonstack.io/id"] = "vmid-1";
  const running: Pod = structuredClone(before);
  running.status = { phase: "Running" };
  const relabelled: Pod = structuredClone(before);
  relabelled.metadata.labels = { x: "y" };
  assert.equal(p.create(before), true);
  assert.equal(p.delete(before), true);
  assert.equal(p.update(before, annotated), true);
  assert.equal(p.update(before, running), true);
  assert.equal(p.update(before, relabelled), true);
  assert.equal(p.generic(before), true);
});
