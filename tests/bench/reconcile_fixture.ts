/**
 * The Go operator's reconcile benchmark (BenchmarkReconcileThroughput), same fixture: 24
 * independent CocoonSets, each missing its main agent and each with a Hibernated
 * CocoonHibernation on that main, so every reconcile lists the namespace's CRs, pays exactly one
 * registry probe of 5 ms and creates the main. A pool of `concurrency` workers drains the 24 sets
 * (the shape MaxConcurrentReconciles gives); a fresh fixture per iteration.
 *
 * Figures: wallMsPerOp (mean wall time of draining all 24) and p95Ms (95th percentile of single
 * reconcile latency). floorMs is the ideal 24 × 5 ms / concurrency; timerFloorMs is the same
 * drain with nothing but the probe's sleep, i.e. what this machine's timers allow. Deno's timers
 * fire about 1.1 ms late, so the probe sleeps 4 ms to take the nominal 5 ms (Go's time.Sleep is
 * exact); the difference between wallMsPerOp and timerFloorMs is the reconciler's own cost.
 *
 * Run alone: `deno run -A tests/bench/reconcile_fixture.ts` (prints one JSON object).
 */
import { FakeClient } from "../../kube/testing/fake.ts";
import type { EventRecorder } from "../../kube/events.ts";
import type { CocoonHibernation } from "../../common/apis/v1/cocoonhibernation_types.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import { FakeRegistry } from "../../snapshot/testing/fake.ts";
import { CocoonSetReconciler } from "../../cocoonset/reconciler.ts";
import { FINALIZER_NAME } from "../../cocoonset/finalizer.ts";

const SETS = 24;
const REGISTRY_DELAY_MS = 5;

/** A 5 ms probe as close as Deno's timers get (see the module doc). */
function probeDelay(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, REGISTRY_DELAY_MS - 1));
}

const quietRecorder: EventRecorder = { event() {}, eventf() {} };

function fixture(): { reconciler: CocoonSetReconciler; names: string[] } {
  const fake = new FakeClient();
  const names: string[] = [];
  for (let i = 0; i < SETS; i++) {
    const name = `bench-${i}`;
    names.push(name);
    fake.seed<CocoonSet>(CocoonSets, {
      metadata: { name, namespace: "ns", uid: `uid-${i}`, finalizers: [FINALIZER_NAME] },
      spec: { agent: { image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04" } },
    });
    fake.seed<CocoonHibernation>(CocoonHibernations, {
      metadata: { name: `${name}-hib`, namespace: "ns" },
      spec: { podRef: { name: `${name}-0` }, desire: "Hibernate" },
      status: { phase: "Hibernated" },
    });
  }
  const registry = new FakeRegistry({ latency: probeDelay });
  const reconciler = new CocoonSetReconciler({
    client: fake,
    apiReader: fake,
    registry,
    recorder: quietRecorder,
  });
  return { reconciler, names };
}

async function drain(
  reconciler: CocoonSetReconciler,
  names: readonly string[],
  concurrency: number,
): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  const signal = new AbortController().signal;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++];
      const t0 = performance.now();
      await reconciler.reconcile({ namespace: "ns", name }, signal);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return latencies;
}

/** Runs the fixture `iterations` times at the given concurrency. */
export async function benchReconcileFixture(
  concurrency: number,
  iterations = 20,
): Promise<{ wallMsPerOp: number; p95Ms: number; floorMs: number; timerFloorMs: number }> {
  // One untimed round so module loading and JIT warm-up are not measured.
  {
    const f = fixture();
    await drain(f.reconciler, f.names, concurrency);
  }
  let wall = 0;
  const latencies: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const f = fixture();
    const t0 = performance.now();
    latencies.push(...await drain(f.reconciler, f.names, concurrency));
    wall += performance.now() - t0;
  }
  let timerWall = 0;
  for (let i = 0; i < iterations; i++) {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next++ < SETS) await probeDelay();
    }));
    timerWall += performance.now() - t0;
  }
  latencies.sort((a, b) => a - b);
  const p95 = latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.95))];
  return {
    wallMsPerOp: +(wall / iterations).toFixed(1),
    p95Ms: +p95.toFixed(1),
    floorMs: (SETS * REGISTRY_DELAY_MS) / concurrency,
    timerFloorMs: +(timerWall / iterations).toFixed(1),
  };
}

/** The three concurrencies the Go benchmark reports, keyed c1 / c4 / c8. */
export async function benchReconcileFixtureAll(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const c of [1, 4, 8]) out[`c${c}`] = await benchReconcileFixture(c);
  return out;
}

if (import.meta.main) {
  console.log(JSON.stringify({ reconcileFixture: await benchReconcileFixtureAll() }));
}
