/**
 * Throughput of the real priority queue + controller with a reconciler that does nothing: the
 * ceiling the runtime itself puts on reconciles per second (queue bookkeeping, metrics,
 * promise hops), independent of any API server.
 */
import { Controller } from "../../kube/controller.ts";
import type { Reconciler } from "../../kube/reconcile.ts";

let runs = 0;

/**
 * Enqueues `keys` distinct keys into a started controller with `concurrency` workers and a
 * no-op reconciler; measures from the first enqueue until every key has been reconciled.
 */
export async function benchNoopReconcile(
  concurrency: number,
  keys: number,
): Promise<{ keysPerSecond: number }> {
  let reconciled = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => allDone = resolve);
  const reconciler: Reconciler = {
    reconcile() {
      if (++reconciled === keys) allDone();
      return Promise.resolve();
    },
  };
  const ctrl = new Controller({
    name: `bench-noop-${++runs}`,
    reconciler,
    maxConcurrentReconciles: concurrency,
  });
  const ac = new AbortController();
  const running = ctrl.start(ac.signal);
  // start() creates the queue synchronously; workers begin once it awaits the (empty) sync.
  const t0 = performance.now();
  for (let i = 0; i < keys; i++) ctrl.enqueue({ namespace: "bench", name: `obj-${i}` });
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  ac.abort();
  await running;
  return { keysPerSecond: keys / seconds };
}

if (import.meta.main) {
  for (const concurrency of [1, 4, 16]) {
    const r = await benchNoopReconcile(concurrency, 100_000);
    console.log(JSON.stringify({ bench: "noop_reconcile", concurrency, keys: 100_000, ...r }));
  }
}
