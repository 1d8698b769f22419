import assert from "node:assert/strict";
import { converged, nodesFor, PODS_PER_SET, setRef } from "./load.ts";

Deno.test("load: simulator nodes leave a quarter spare and stay near 250 pods each", () => {
  for (const sets of [1, 20, 100, 200, 1_000]) {
    const nodes = nodesFor(sets);
    const seats = nodes.reduce((n, node) => n + node.seats, 0);
    assert.ok(seats >= sets * PODS_PER_SET * 1.25, `${sets} sets: ${seats} seats`);
    assert.ok(nodes.every((n) => n.seats <= 250 && n.seats >= 2 * PODS_PER_SET), `${sets} sets`);
    assert.equal(new Set(nodes.map((n) => n.name)).size, nodes.length);
  }
});

Deno.test("load: sets fill namespaces of fifty", () => {
  assert.deepEqual(setRef(0), { namespace: "bench-0", name: "set-0" });
  assert.deepEqual(setRef(49), { namespace: "bench-0", name: "set-49" });
  assert.deepEqual(setRef(50), { namespace: "bench-1", name: "set-50" });
});

Deno.test("load: a set counts as converged only when Running for its spec with every pod ready", () => {
  const base = { metadata: { name: "s", generation: 2 }, spec: { agent: { image: "i" } } };
  const status = { phase: "Running", observedGeneration: 2, readyAgents: 4, readyToolboxes: 1 };
  assert.equal(converged({ ...base, status } as never), true);
  assert.equal(
    converged({ ...base, status: { ...status, observedGeneration: 1 } } as never),
    false,
  );
  assert.equal(converged({ ...base, status: { ...status, readyAgents: 3 } } as never), false);
  assert.equal(converged({ ...base, status: { ...status, phase: "Scaling" } } as never), false);
});
