/**
 * A label-scoped pod cache (ManagerOptions.byObject) on a real kube-apiserver: the selector goes
 * to the server, so out-of-scope pods never reach the process (counted on the wire), handlers
 * hear only managed pods, and a pod whose label flips into or out of the scope arrives as an add
 * or a delete. Run with the apiserver's watch cache off (watches from etcd) and on (as
 * production clusters run it): the two serve filtered watches through different code.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { byObject, InformerCache } from "../../kube/cache.ts";
import type { Client, ListOptions, WatchEvent, WatchOptions } from "../../kube/client.ts";
import { Namespaces, type Pod, Pods, ServiceAccounts } from "../../kube/core.ts";
import { isAlreadyExists, isNotFound } from "../../kube/errors.ts";
import type { KubeObject, ObjectList } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import { FakeClient } from "../../kube/testing/fake.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { waitFor } from "../harness/wait.ts";

const OWNER = "cocoonset.cocoonstack.io/name";

async function createNamespace(c: Client, name: string): Promise<void> {
  await c.create(Namespaces, { metadata: { name } });
  // No controller-manager creates the default ServiceAccount the admission plugin wants.
  await c.create(ServiceAccounts, { metadata: { name: "default", namespace: name } })
    .catch((err) => {
      if (!isAlreadyExists(err)) throw err;
    });
}

function pod(namespace: string, name: string, labels: Record<string, string> = {}): Pod {
  return {
    metadata: { name, namespace, labels },
    spec: { containers: [{ name: "c", image: "img" }] },
  };
}

/** Creates the pods a batch at a time (the API server takes them in parallel). */
async function createAll(c: Client, pods: Pod[]): Promise<void> {
  for (let i = 0; i < pods.length; i += 25) {
    await Promise.all(pods.slice(i, i + 25).map((p) => c.create(Pods, p)));
  }
}

/** An API client that counts the objects the server sent to lists and watches. */
class CountingClient extends ApiClient {
  received = 0;

  override async list<T extends KubeObject>(
    rt: ResourceType<T>,
    opts?: ListOptions,
  ): Promise<ObjectList<T>> {
    const page = await super.list(rt, opts);
    this.received += page.items.length;
    return page;
  }

  override watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>> {
    const stream = super.watch(rt, opts);
    const count = () => this.received++;
    return (async function* () {
      for await (const ev of stream) {
        if (ev.type !== "BOOKMARK") count();
        yield ev;
      }
    })();
  }
}

const names = (items: KubeObject[]) =>
  items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();

function scopedCacheTest(watchCache: boolean) {
  return async (t: Deno.TestContext) => {
    const cp = await startControlPlane({ watchCache, crdDir: "" });
    const transport = new Transport(await loadRestConfig(cp.kubeconfigPath));
    const client = new ApiClient(transport);
    try {
      await createNamespace(client, "noise");
      await createNamespace(client, "scoped");
      // 200 pods the operator does not manage, some with look-alike labels, and a few it does.
      await createAll(client, [
        ...Array.from(
          { length: 200 },
          (_, i) =>
            pod("noise", `unrelated-${i}`, i % 2 ? { "cocoonset.cocoonstack.io/role": "x" } : {}),
        ),
        pod("scoped", "plain"),
        pod("scoped", "m-0", { [OWNER]: "demo" }),
        pod("scoped", "m-1", { [OWNER]: "demo" }),
        pod("noise", "m-2", { [OWNER]: "other" }),
      ]);

      await t.step("label selector forms select the same pods as on the fake", async () => {
        const fake = new FakeClient();
        const forms: Record<string, string>[] = [
          { [OWNER]: "demo", tier: "x" },
          { [OWNER]: "demo", tier: "y" },
          { [OWNER]: "other" },
          { tier: "x" },
          {},
        ];
        await createNamespace(client, "forms");
        for (const [i, labels] of forms.entries()) {
          await client.create(Pods, pod("forms", `f-${i}`, labels));
          await fake.create(Pods, pod("forms", `f-${i}`, labels));
        }
        const selectors = [
          OWNER,
          `!${OWNER}`,
          "tier!=x",
          `${OWNER}!=demo`,
          `${OWNER} in (other, demo),tier notin (y)`,
          `tier in (x,y),${OWNER}=demo`,
          { [OWNER]: "other" },
        ];
        for (const labelSelector of selectors) {
          const opts = { namespace: "forms", labelSelector };
          const onServer = names((await client.list(Pods, opts)).items);
          assert.deepEqual(
            onServer,
            names((await fake.list(Pods, opts)).items),
            `${labelSelector}`,
          );
        }
        assert.deepEqual(
          names((await client.list(Pods, { namespace: "forms", labelSelector: OWNER })).items),
          [
            "forms/f-0",
            "forms/f-1",
            "forms/f-2",
          ],
        );
      });

      await t.step("a label-scoped pod cache holds and hears only labelled pods", async () => {
        const wire = new CountingClient(transport);
        const cache = new InformerCache({
          client: wire,
          byObject: [byObject(Pods, { labelSelector: OWNER })],
          informerDefaults: { minBackoffMs: 50, maxBackoffMs: 200 },
        });
        const seen: string[] = [];
        cache.informerFor(Pods).addEventHandler({
          onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
          onUpdate: (_o, n) => seen.push(`update:${n.metadata.name}`),
          onDelete: (o) => seen.push(`delete:${o.metadata.name}`),
        });
        const ac = new AbortController();
        cache.start(ac.signal);
        try {
          await cache.waitForSync(AbortSignal.timeout(20_000));
          const managed = [
            "forms/f-0",
            "forms/f-1",
            "forms/f-2",
            "noise/m-2",
            "scoped/m-0",
            "scoped/m-1",
          ];
          assert.deepEqual(names((await cache.list(Pods)).items), managed);
          assert.deepEqual(seen.sort(), [
            "add*:f-0",
            "add*:f-1",
            "add*:f-2",
            "add*:m-0",
            "add*:m-1",
            "add*:m-2",
          ]);
          assert.equal(wire.received, managed.length, "the server sent only the labelled pods");
          seen.length = 0;

          // Unrelated churn, then a labelled marker: once the marker is heard, the churn before
          // it on the same stream was filtered out, not pending.
          await client.create(Pods, pod("noise", "late-unrelated"));
          await client.patch(Pods, "noise", "unrelated-0", "merge", {
            metadata: { annotations: { touched: "yes" } },
          });
          await client.delete(Pods, "noise", "unrelated-1", { gracePeriodSeconds: 0 });
          await client.create(Pods, pod("scoped", "m-3", { [OWNER]: "demo" }));
          await waitFor("marker heard", () => seen.includes("add:m-3"), 20_000);
          assert.deepEqual(seen, ["add:m-3"]);
          assert.equal(wire.received, managed.length + 1);
          seen.length = 0;

          // The label flips in, changes inside the scope, then flips out.
          await client.patch(Pods, "scoped", "plain", "merge", {
            metadata: { labels: { [OWNER]: "demo" } },
          });
          await waitFor("entered the scope", () => seen.includes("add:plain"), 20_000);
          await client.patch(Pods, "scoped", "plain", "merge", {
            metadata: { labels: { v: "2" } },
          });
          await waitFor("changed in the scope", () => seen.includes("update:plain"), 20_000);
          await client.patch(Pods, "scoped", "plain", "merge", {
            metadata: { labels: { [OWNER]: null } },
          });
          await waitFor("left the scope", () => seen.includes("delete:plain"), 20_000);
          assert.deepEqual(seen, ["add:plain", "update:plain", "delete:plain"]);
          await assert.rejects(cache.get(Pods, "scoped", "plain"), isNotFound);
          // Still on the server, where the apiReader would find it.
          assert.equal((await client.get(Pods, "scoped", "plain")).metadata.labels?.v, "2");
          assert.equal(cache.informerFor(Pods).size, managed.length + 1);
          assert.equal(cache.informerFor(Pods).stats.lists, 1, "no relist along the way");
        } finally {
          ac.abort();
          await cache.stopped();
        }
      });
    } finally {
      transport.close();
      await cp.stop();
    }
  };
}

Deno.test({
  name: "scoped pod cache on a real control plane (watch cache off)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: scopedCacheTest(false),
});

Deno.test({
  name: "scoped pod cache on a real control plane (watch cache on)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: scopedCacheTest(true),
});
