/**
 * The whole system with the operator started as on a developer machine whose kubeconfig user
 * runs an exec credential plugin (GKE, EKS and AKS kubeconfigs all do): `deno task start`
 * resolves the plugin on PATH and grants exactly it to run; the operator authenticates with the
 * plugin's token, runs it again when the token's claimed expiry passes, and drives a CocoonSet
 * through create, scale-up and delete on the simulator.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../../common/apis/v1/resources.ts";
import { sampleSum } from "../harness/prom_text.ts";
import {
  createSet,
  getSet,
  inPhase,
  patchSpec,
  waitGone,
  waitSet,
} from "../harness/stack_objects.ts";
import { waitUntil } from "../harness/wait.ts";
import { e2eSuite } from "./_support.ts";

const NS = "e2e-exec-plugin";
const TTL_SECONDS = 15;

function running(agents: number): (cs: CocoonSet) => boolean {
  return (cs) =>
    inPhase("Running")(cs) && cs.status?.readyAgents === agents &&
    cs.status.desiredAgents === agents;
}

e2eSuite(
  "exec-plugin kubeconfig",
  { execPlugin: { ttlSeconds: TTL_SECONDS } },
  async (stack, step) => {
    const plugin = stack.execPlugin!;
    const startedBy = Date.now();

    await step("deno task start grants running the plugin's one path, nothing else", async () => {
      const flags = stack.operators[0].flags;
      assert.deepEqual(flags.filter((f) => f.startsWith("--allow-run")), [
        `--allow-run=${plugin.path}`,
      ]);
      assert.equal(await plugin.runs(), 1, "one run at start-up");
    });

    let cs: CocoonSet | undefined;
    await step("a CocoonSet with a sub-agent runs", async () => {
      const created = await createSet(stack, NS, "exec", { agent: { replicas: 1 } });
      cs = await waitSet(stack, created, "Running with 2 agents", running(2));
    });

    await step("after the token's claimed expiry the plugin runs again, once", async () => {
      await waitUntil(() => Date.now() > startedBy + (TTL_SECONDS + 1) * 1000, {
        what: "the first token's expiry",
        timeoutMs: 60_000,
        intervalMs: 250,
      });
      await patchSpec(stack, cs!, { agent: { replicas: 2 } });
      await waitSet(stack, cs!, "Running with 3 agents", running(3));
      const runs = await plugin.runs();
      assert.ok(runs >= 2, `${runs} runs`);
      const requests = sampleSum(
        await stack.operators[0].metrics(),
        "rest_client_requests_total",
        {},
      );
      assert.ok(requests > 3 * runs, `${requests} requests for ${runs} plugin runs`);
    });

    await step("deleted: the finalizer lets go once the pods are gone", async () => {
      await stack.admin.delete(CocoonSets, NS, "exec");
      await waitGone(`${NS}/exec`, () => getSet(stack, cs!));
    });
  },
);
