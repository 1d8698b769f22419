import assert from "node:assert/strict";
import { Harness, readyOf, request, vmPod } from "./_fixtures.ts";
import { podNameProblem, specProblem } from "./spec_check.ts";
import { COCOON_HIBERNATION_PHASE_FAILED } from "../common/apis/v1/mod.ts";
import { readHibernateState } from "../common/meta/hibernate.ts";

Deno.test("pod names must be DNS-1123 subdomains", () => {
  for (const ok of ["demo-0", "a", "a.b-c", "0", "x".repeat(253)]) {
    assert.equal(podNameProblem(ok), undefined, ok);
  }
  for (const bad of ["demo/0", "Demo", "-a", "a-", "a..b", "a_b", " a", "x".repeat(254)]) {
    assert.ok(podNameProblem(bad), bad);
  }
});

Deno.test("specProblem names what is wrong, in order: podRef missing, invalid, desire", () => {
  assert.equal(specProblem(request("h", "Hibernate", { pod: "" })), "spec.podRef.name is required");
  assert.match(specProblem(request("h", "Hibernate", { pod: "a/b" }))!, /"a\/b" is not a valid/);
  assert.equal(specProblem(request("h", "Nap")), 'unknown desire "Nap"');
  assert.equal(specProblem(request("h", "Wake")), undefined);
});

Deno.test("specProblem quotes at most the start of an overlong podRef (Ready messages are capped)", () => {
  // The CRD does not bound podRef.name, the condition message is at most 32768 characters: a
  // message quoting the whole name could never be written, and the request would show nothing.
  const problem = specProblem(request("h", "Hibernate", { pod: "x".repeat(40_000) }))!;
  assert.match(problem, /is not a valid pod name: must be no more than 253 characters/);
  assert.ok(problem.length < 1_024, `message of ${problem.length} characters`);
});

// --- spec checks (Differences from the Go operator) ------------------------------------------

Deno.test("a request without a podRef fails at once", async () => {
  const bad = request("hib", "Hibernate", { pod: "" });
  const h = Harness.create([bad]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(got.status)?.message, "spec.podRef.name is required");
  const rv = got.metadata.resourceVersion;
  await h.reconcile("hib");
  assert.equal((await h.hib("hib")).metadata.resourceVersion, rv, "the message is written once");
  await h.close();
});

Deno.test("a podRef that is not a valid pod name fails at once, saying so", async () => {
  const h = Harness.create([request("hib", "Hibernate", { pod: "demo/0" })]);
  assert.deepEqual(await h.reconcile("hib"), {});
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.match(readyOf(got.status)?.message ?? "", /"demo\/0" is not a valid pod name/);
  assert.equal(h.api.actions.filter((a) => a.resource.plural === "pods").length, 0);
  await h.close();
});

Deno.test("an unknown desire fails at once", async () => {
  const h = Harness.create([request("hib", "Sleep"), vmPod()]);
  await h.reconcile("hib");
  const got = await h.hib("hib");
  assert.equal(got.status?.phase, COCOON_HIBERNATION_PHASE_FAILED);
  assert.equal(readyOf(got.status)?.message, 'unknown desire "Sleep"');
  assert.equal(readHibernateState(await h.pod()), false);
  await h.close();
});
