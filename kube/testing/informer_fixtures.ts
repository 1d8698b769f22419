/**
 * Fixtures the informer's tests share (kube/informer_test.ts, kube/watcher_test.ts,
 * kube/store_test.ts): a pod, a handler that records what it heard, and a running informer
 * over a FakeClient. Not exported from kube/testing/mod.ts: they serve kube/'s own tests.
 *
 * @module
 */
import { type Pod, Pods } from "../core.ts";
import { SharedInformer } from "../informer.ts";
import type { KubeObject } from "../object.ts";
import type { FakeClient } from "./fake.ts";

/** A pod in namespace ns carrying managedFields (which the store strips). */
export function pod(name: string, labels: Record<string, string> = {}): Pod {
  return {
    metadata: { name, namespace: "ns", labels, managedFields: [{ manager: "kubectl" }] },
    spec: { containers: [{ name: "agent", image: "img" }] },
  };
}

/** Records handler calls as "add:name" ("add*:" for the initial list), "update:", "delete:". */
export function recorder(): {
  seen: string[];
  handler: {
    onAdd: (o: KubeObject, initial: boolean) => void;
    onUpdate: (o: KubeObject, n: KubeObject) => void;
    onDelete: (o: KubeObject) => void;
  };
} {
  const seen: string[] = [];
  return {
    seen,
    handler: {
      onAdd: (o: KubeObject, initial: boolean) =>
        seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
      onUpdate: (_o: KubeObject, n: KubeObject) => seen.push(`update:${n.metadata.name}`),
      onDelete: (o: KubeObject) => seen.push(`delete:${o.metadata.name}`),
    },
  };
}

/** Runs fn against a synced pod informer of fake (backoff 5–20 ms), then stops it. */
export async function withInformer(
  fake: FakeClient,
  fn: (inf: SharedInformer<Pod>, seen: string[]) => Promise<void>,
): Promise<void> {
  const inf = new SharedInformer({ client: fake, rt: Pods, minBackoffMs: 5, maxBackoffMs: 20 });
  const rec = recorder();
  inf.addEventHandler(rec.handler);
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(5000));
    await fn(inf, rec.seen);
  } finally {
    ac.abort();
    await run;
  }
}
