/**
 * The same runtime guarantees on an apiserver with its watch cache on, as production clusters
 * run it (the default harness turns it off so etcd compaction can force 410s). With the cache
 * on, watches are served from apiserver memory, and after a restart an old resourceVersion is
 * "too old" for the fresh cache: the informer must relist and still report each change once.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces, Pods } from "../../kube/core.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { startGatedPodInformer } from "../harness/gated_informer.ts";
import { waitFor } from "../harness/wait.ts";
import { semanticsCases } from "../semantics/api_semantics.ts";

Deno.test({
  name: "kube runtime on an apiserver with the watch cache on",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane({ watchCache: true });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    try {
      await t.step("API semantics match the fake", async (t) => {
        let i = 0;
        for (const c of semanticsCases) {
          const ns = `wc-${i++}`;
          await client.create(Namespaces, { metadata: { name: ns } });
          await t.step(c.name, () => c.fn(client, ns));
        }
      });

      await t.step("changes across an apiserver restart are delivered exactly once", async () => {
        await client.create(Namespaces, { metadata: { name: "wc-cache" } });
        for (const n of ["keep", "change", "remove"]) {
          await client.create(Pods, {
            metadata: { name: n, namespace: "wc-cache" },
            spec: { containers: [{ name: "c", image: "img" }] },
          });
        }
        const { informer, gate, seen, stop } = startGatedPodInformer(client, "wc-cache");
        try {
          await informer.waitForSync(AbortSignal.timeout(10_000));
          seen.length = 0;
          gate.closed = true;
          await cp.restartApiServer();
          await client.patch(Pods, "wc-cache", "change", "merge", {
            metadata: { labels: { v: "1" } },
          });
          await client.delete(Pods, "wc-cache", "remove");
          await client.create(Pods, {
            metadata: { name: "new", namespace: "wc-cache" },
            spec: { containers: [{ name: "c", image: "img" }] },
          });
          gate.closed = false;
          await waitFor("gap delivered", () => seen.length >= 3, 20_000);
          assert.deepEqual(seen.sort(), ["add:new", "delete:remove", "update:change:1"]);
          // A later change arrives once more, on the re-established stream.
          await client.patch(Pods, "wc-cache", "keep", "merge", {
            metadata: { labels: { v: "2" } },
          });
          await waitFor("live update", () => seen.includes("update:keep:2"), 20_000);
          assert.equal(seen.length, 4);
        } finally {
          await stop();
        }
      });
    } finally {
      transport.close();
      await cp.stop();
    }
  },
});
