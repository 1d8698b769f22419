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
