/**
 * What /metrics serves, pinned byte for byte against testdata/exposition.txt: every family's
 * HELP and TYPE lines, label names and their order, histogram buckets and the text format, with
 * one series written through each family (the queue's through a real queue). Names, labels and
 * buckets follow the Go operator and controller-runtime (metrics/contract_test.ts,
 * kube/metrics_contract_test.ts); dashboards and alerts read this text. Process families change
 * from run to run, so their values are masked. promtool, when installed, checks the text too.
 */
import assert from "node:assert/strict";
import {
  activeWorkers,
  leaderElectionMasterStatus,
  maxConcurrentReconciles,
  reconcileErrors,
  reconcilePanics,
  reconcileTime,
  reconcileTimeouts,
  reconcileTotal,
  registry,
  shardFilteredObjects,
  shardServerFiltered,
  terminalReconcileErrors,
} from "../kube/metrics.ts";
import { PriorityQueue } from "../kube/priority_queue.ts";
import { countRequest } from "../kube/request_counts.ts";
import {
  shardDeadLeasesDeleted,
  shardFiltered,
  shardHandovers,
  shardHandoverSeconds,
  shardMembers,
  shardOwnedFraction,
  shardRangeEnd,
  shardRangeStart,
} from "../kube/sharding/metrics.ts";
import { FakeClock } from "../kube/testing/fake_clock.ts";
import {
  hibernatePhaseDurationSeconds,
  lifecycleStateFailedObservedTotal,
  rbacFeatureEnabled,
  register,
  slotReleasePodsDeletedTotal,
  slotReleaseWakeTotal,
  slotReleaseWakeUnschedulableTotal,
  subAgentDeadLetterTotal,
  subAgentRebuildTotal,
  wakePhaseDurationSeconds,
} from "./metrics.ts";

const golden = new URL("./testdata/exposition.txt", import.meta.url);

/** Writes one series (or a few) through every family the operator serves. */
async function exercise(): Promise<void> {
  register();
  const controller = "cocoonset";
  reconcileTotal.inc({ controller, result: "success" });
  reconcileTotal.inc({ controller, result: "requeue_after" }, 2);
  reconcileErrors.inc({ controller });
  terminalReconcileErrors.labels({ controller }).inc(0);
  reconcilePanics.labels({ controller }).inc(0);
  reconcileTimeouts.labels({ controller }).inc(0);
  reconcileTime.observe({ controller }, 0.042);
  maxConcurrentReconciles.set({ controller }, 4);
  activeWorkers.set({ controller }, 1);

  const clock = new FakeClock(1_000_000);
  const queue = new PriorityQueue({ name: controller, clock });
  queue.add("ns/a");
  queue.addWithOpts({ priority: -100 }, "ns/b");
  clock.advance(1500);
  const key = (await queue.get())!;
  clock.advance(250);
  queue.done(key);
  queue.addAfter("ns/c", 10);
  queue.shutDown();

  leaderElectionMasterStatus.set({ name: "cocoon-operator.cocoonset.cocoonstack.io" }, 1);
  for (let i = 0; i < 3; i++) countRequest("200", "GET", "10.96.0.1:443");
  countRequest("<error>", "PATCH", "10.96.0.1:443");
  shardFilteredObjects.inc({ resource: "pods" }, 5);
  shardServerFiltered.set({ resource: "pods" }, 1);

  shardOwnedFraction.set(0.5);
  shardRangeStart.set(0);
  shardRangeEnd.set(9223372036854775807);
  shardMembers.set(2);
  shardHandovers.inc({ direction: "acquired" });
  shardHandoverSeconds.observe({ direction: "released" }, 3.5);
  shardFiltered.inc({ kind: "CocoonSet", stage: "event" });
  shardDeadLeasesDeleted.inc({ reason: "expired" });

  const set = { namespace: "team-a", cocoonset: "agents" };
  subAgentRebuildTotal.inc(set);
  subAgentDeadLetterTotal.inc(set);
  hibernatePhaseDurationSeconds.observe({ result: "ok" }, 42);
  wakePhaseDurationSeconds.observe({ result: "timeout" }, 600);
  lifecycleStateFailedObservedTotal.inc({ phase: "Running" });
  slotReleasePodsDeletedTotal.inc(set);
  slotReleaseWakeTotal.inc({ ...set, placement: "hint-node" });
  slotReleaseWakeUnschedulableTotal.inc(set);
  rbacFeatureEnabled.set({ feature: "node-checks" }, 0);
}

/** The exposition with the process families' values (CPU, memory, start time) masked. */
function masked(text: string): string {
  return text.replace(/^(process_\w+) \S+$/gm, "$1 <value>");
}

let scraped: string | undefined;

/** The registry's exposition after exercise(), scraped once for every test of this file. */
async function exposition(): Promise<string> {
  if (scraped === undefined) {
    await exercise();
    scraped = await registry.metrics();
  }
  return scraped;
}

Deno.test("exposition: /metrics prints every family as testdata/exposition.txt holds it", async () => {
  assert.equal(masked(await exposition()), await Deno.readTextFile(golden));
});

Deno.test("exposition: promtool check metrics accepts it", async () => {
  const promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
  if (!promtool) {
    if (Deno.env.get("CI")) {
      throw new Error("promtool is not installed (apt-get install prometheus)");
    }
    return;
  }
  const child = new Deno.Command(promtool, {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(await exposition()));
  await writer.close();
  const out = await child.output();
  const dec = new TextDecoder();
  assert.equal(out.code, 0, dec.decode(out.stdout) + dec.decode(out.stderr));
});
