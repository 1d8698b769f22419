/**
 * On a real control plane: the spec check (dry-run creates) runs only when a pod
 * is about to be created or replaced, so a restarted operator, whose in-process memory of
 * verified shapes is empty, sends no dry-run for sets that converged under its predecessor and
 * whose spec did not change. The operator is the real process (`deno task start`), its requests
 * counted by the bench's proxy (tests/bench/api_proxy.ts) between it and the API server; the
 * VMs are played by the simulator.
 *
 * @module
 */
import assert from "node:assert/strict";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import type { ProxiedApiRequest } from "../bench/api_proxy.ts";
import { createSets, nodesFor, setRef, waitConverged } from "../bench/load.ts";
import { DEFAULT_OPERATOR_CMD } from "../bench/operator_under_test.ts";
import { startBenchSystem } from "../bench/system.ts";
import { reconcilesOf } from "../harness/operator_metrics.ts";
import { registryAvailable } from "../harness/registry.ts";
import { waitUntil } from "../harness/wait.ts";

const SETS = 5;

const dryRuns = (requests: readonly ProxiedApiRequest[]) =>
  requests.filter((r) => r.verb === "create" && r.dryRun);

Deno.test({
  name: "a restarted operator sends no dry-run for converged sets whose spec did not change",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using system = await startBenchSystem({
      operatorCmd: DEFAULT_OPERATOR_CMD,
      nodes: nodesFor(SETS),
    });
    const admin = system.stack.admin;
    await system.startOperator();
    await createSets(admin, 0, SETS);
    await waitConverged(admin, SETS, 300_000);
    assert.ok(dryRuns(system.api.requests).length > 0, "the first operator checked the shapes");

    // The restart: a new process, started after the old one stopped.
    const restarted = await system.startOperator();
    const since = restarted.spawnedAt;
    await waitUntil(async () => {
      const done = reconcilesOf(await restarted.metrics(), "cocoonset");
      return done >= SETS ? done : undefined;
    }, { what: `${SETS} CocoonSet reconciles by the restarted operator`, timeoutMs: 120_000 });
    assert.ok(await system.waitQuiet(2_000, 120_000), "the restarted operator settled");
    assert.deepEqual(
      dryRuns(system.api.between(since)).map((r) => r.path),
      [],
      "no dry-run after the restart",
    );

    // The same counter sees a check when one is due: an edit that adds a sub-agent.
    const edited = setRef(0);
    const cs = await admin.get(CocoonSets, edited.namespace, edited.name);
    await admin.patch(CocoonSets, edited.namespace, edited.name, "merge", {
      spec: { agent: { replicas: (cs.spec.agent.replicas ?? 0) + 1 } },
    });
    await waitUntil(
      () => dryRuns(system.api.between(since)).length > 0 ? true : undefined,
      { what: "a dry-run of the edited set's shapes", timeoutMs: 120_000 },
    );
  },
});
