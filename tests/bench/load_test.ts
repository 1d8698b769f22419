import assert from "node:assert/strict";
import type { CocoonSetPhase } from "../../common/apis/v1/enums.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import { waitUntil } from "../harness/wait.ts";
import { converged, nodesFor, PODS_PER_SET, setRef, watchObjects } from "./load.ts";

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
  const base = {
    metadata: { name: "s", generation: 2 },
    spec: { agent: { image: "i", replicas: 3 }, toolboxes: [{ name: "t", image: "i" }] },
  };
  const status = { phase: "Running", observedGeneration: 2, readyAgents: 4, readyToolboxes: 1 };
  assert.equal(converged({ ...base, status } as never), true);
  assert.equal(
    converged({ ...base, status: { ...status, observedGeneration: 1 } } as never),
    false,
  );
  assert.equal(converged({ ...base, status: { ...status, readyAgents: 3 } } as never), false);
  assert.equal(converged({ ...base, status: { ...status, readyToolboxes: 0 } } as never), false);
  assert.equal(converged({ ...base, status: { ...status, phase: "Scaling" } } as never), false);
  // A main alone (a release set): no toolbox count in its status.
  const main = { metadata: { name: "m", generation: 1 }, spec: { agent: { image: "i" } } };
  assert.equal(
    converged({ ...main, status: { phase: "Running", observedGeneration: 1, readyAgents: 1 } }),
    true,
  );
  assert.equal(
    converged({ ...main, status: { phase: "Running", observedGeneration: 1, readyAgents: 0 } }),
    false,
  );
});

Deno.test("load: a watch counts the objects that reach a state, as they change", async () => {
  const api = new FakeClient();
  /** Creates a set, then writes its phase through the status subresource, as the API wants. */
  const put = async (name: string, phase?: CocoonSetPhase) => {
    const cs = await api.create(CocoonSets, {
      metadata: { name, namespace: "n" },
      spec: { agent: { image: "i" } },
    });
    if (phase) await api.updateStatus(CocoonSets, { ...cs, status: { phase } });
  };
  await put("a", "Running");
  await using sets = await watchObjects(api, CocoonSets);
  const running = (cs: { status?: { phase?: string } }) => cs.status?.phase === "Running";
  // Already true: at once.
  const before = performance.now();
  assert.ok(await sets.waitFor(1, running, "sets Running", 1_000) >= before);

  const two = sets.waitFor(2, running, "sets Running", 5_000);
  await put("b");
  await put("c", "Running");
  await two;
  assert.deepEqual(sets.countBy((cs) => cs.status?.phase ?? "-"), { Running: 2, "-": 1 });

  // A deleted object no longer counts; a wait that is not met says how far it got.
  await api.delete(CocoonSets, "n", "c");
  await waitUntil(() => sets.size === 2, { what: "the delete seen", timeoutMs: 5_000 });
  await assert.rejects(
    sets.waitFor(2, running, "sets Running", 200),
    /waiting for 2 sets Running \(1 reached\)/,
  );
});
