import assert from "node:assert/strict";
import { request } from "./_fixtures.ts";
import { podNameProblem, specProblem } from "./spec_check.ts";

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
