/**
 * Informers against a real kube-apiserver: the initial state streamed with watch-list
 * (sendInitialEvents) where the server serves it, LIST + WATCH where it refuses it (the WatchList
 * feature gate off), a refusal remembered so that later relists do not ask again, and watch
 * liveness: a watch whose connection goes half-open (a proxy that
 * stops forwarding without closing) is ended by its client-side deadline and resumed, and the
 * manager's /healthz fails while an informer hears nothing, then recovers.
 */
import assert from "node:assert/strict";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces, type Pod, Pods } from "../../kube/core.ts";
import { SharedInformer } from "../../kube/informer.ts";
import { Manager } from "../../kube/manager.ts";
import { type RestConfig, Transport } from "../../kube/transport.ts";
import { type ApiProxy, startApiProxy } from "../bench/api_proxy.ts";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { releaseAvailability } from "../harness/kubernetes_versions.ts";
import type { KubernetesMinor } from "../../scripts/envtest.ts";
import { waitFor } from "../harness/wait.ts";

/** A client that reaches cp through a counting (and stallable) proxy, as the admin user. */
function viaProxy(cp: ControlPlane): { proxy: ApiProxy; client: ApiClient; close(): void } {
  const proxy = startApiProxy(cp.server, cp.caCertPem, {
    cert: cp.adminCertPem,
    key: cp.adminKeyPem,
  });
  const cfg: RestConfig = { server: proxy.url };
  const transport = new Transport(cfg);
  return { proxy, client: new ApiClient(transport), close: () => transport.close() };
}

function pod(namespace: string, name: string): Pod {
  return {
    metadata: { name, namespace },
    spec: { containers: [{ name: "c", image: "img" }] },
  };
}

async function informerRun(
  client: ApiClient,
  namespace: string,
  fn: (inf: SharedInformer<Pod>, seen: string[]) => Promise<void>,
): Promise<void> {
  const inf = new SharedInformer<Pod>({ client, rt: Pods, namespace, watchList: true });
  const seen: string[] = [];
  inf.addEventHandler({
    onAdd: (o, initial) => seen.push(`add${initial ? "*" : ""}:${o.metadata.name}`),
    onUpdate: (_o, n) => seen.push(`update:${n.metadata.name}`),
    onDelete: (o) => seen.push(`delete:${o.metadata.name}`),
  });
  const ac = new AbortController();
  const run = inf.run(ac.signal);
  try {
    await inf.waitForSync(AbortSignal.timeout(30_000));
    await fn(inf, seen);
  } finally {
    ac.abort();
    await run;
  }
}

/** The proxied list and watch requests for pods, as "list", "watch" or "watch-list" + status. */
function podReads(proxy: ApiProxy): string[] {
  return proxy.requests
    .filter((r) => r.resource === "pods" && (r.verb === "list" || r.verb === "watch"))
    .map((r) => `${r.verb}${/sendInitialEvents=true/.test(r.query) ? "-list" : ""}:${r.status}`);
}

Deno.test({
  name: "informers on a real API server: watch-list, and liveness through a half-open watch",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const { proxy, client, close } = viaProxy(cp);
    try {
      await t.step("the initial state streams over the watch: no LIST", async () => {
        await client.create(Namespaces, { metadata: { name: "wl" } });
        await client.create(Pods, pod("wl", "a"));
        await client.create(Pods, pod("wl", "b"));
        const from = proxy.requests.length;
        await informerRun(client, "wl", async (inf, seen) => {
          assert.deepEqual(seen.sort(), ["add*:a", "add*:b"]);
          await client.create(Pods, pod("wl", "c"));
          await waitFor("c added", () => seen.includes("add:c"), 30_000);
          assert.equal(inf.stats.watchListSyncs, 1);
          assert.equal(inf.stats.lists, 0);
          assert.deepEqual(podReads({ ...proxy, requests: proxy.requests.slice(from) }), [
            "watch-list:200",
          ]);
        });
      });

      await t.step(
        "a watch that goes half-open is restarted; /healthz fails meanwhile, then recovers",
        async () => {
          await client.create(Namespaces, { metadata: { name: "stall" } });
          const manager = new Manager({
            client,
            metricsBindAddress: "0",
            healthProbeBindAddress: "127.0.0.1:0",
            leaderElection: false,
            leaderElectionId: "liveness-test",
            cacheNamespace: "stall",
            watchList: true,
            informerStallLimitMs: 2_000,
            // Short watches so the test sees a deadline: 4 s on the server, 4 s of grace here.
            informerDefaults: { watchTimeoutSeconds: () => 4, watchDeadlineGraceMs: 4_000 },
          });
          const pods = manager.cache.informerFor(Pods);
          const seen: string[] = [];
          pods.addEventHandler({ onAdd: (o) => seen.push(o.metadata.name ?? "") });
          manager.add({
            start: (signal) =>
              new Promise((resolve) => signal.addEventListener("abort", () => resolve())),
          });
          const ac = new AbortController();
          const started = manager.start(ac.signal);
          try {
            const addr = await waitFor("probe bound", () => manager.servers.probeAddr, 30_000);
            const healthz = async (path = "/healthz") => {
              const res = await fetch(`http://127.0.0.1:${addr.port}${path}`);
              return `${res.status} ${(await res.text()).trim()}`;
            };
            await waitFor("synced", () => manager.cache.hasSynced(), 30_000);
            assert.equal(await healthz(), "200 ok");
            await waitFor("a watch open", () => proxy.stallOpenStreams() > 0, 30_000);
            // What changes now travels only on the stalled stream, which never forwards it.
            await client.create(Pods, pod("stall", "during-stall"));
            const failing = await waitFor(
              "/healthz failing",
              async () => {
                const h = await healthz("/healthz/informers");
                return h.startsWith("500") && h;
              },
              30_000,
              100,
            );
            assert.match(failing, /no progress from the API server for pods/);
            await waitFor(
              "the deadline restarted the watch",
              () => pods.stats.watchDeadlinesHit >= 1,
              30_000,
            );
            await waitFor(
              "the change seen on the new watch",
              () => seen.includes("during-stall"),
              30_000,
            );
            await waitFor(
              "/healthz healthy again",
              async () => (await healthz()) === "200 ok",
              30_000,
            );
            assert.equal(pods.stats.lists, 0, "resumed from its resourceVersion, no relist");
          } finally {
            ac.abort();
            await started;
          }
        },
      );
    } finally {
      close();
      await proxy.close();
      await cp.stop();
    }
  },
});

/**
 * Servers that refuse watch-list streams: 1.35 with the gate turned off, and 1.33, where it is
 * off by default (run when its binaries are there; tests/harness/kubernetes_versions.ts).
 */
const REFUSING_SERVERS: { name: string; minor: KubernetesMinor; flags: string[] }[] = [
  {
    name: "1.35 with the WatchList feature off",
    minor: "1.35",
    flags: ["--feature-gates=WatchList=false"],
  },
  { name: "1.33, WatchList off by default", minor: "1.33", flags: [] },
];

for (const server of REFUSING_SERVERS) {
  const availability = await releaseAvailability(server.minor);
  Deno.test({
    name: `informers on a real API server refusing watch-list (${server.name}): LIST then WATCH, ` +
      `and no watch-list asked again${availability.nameSuffix}`,
    ignore: availability.ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      if (availability.missing) throw new Error(availability.missing);
      const cp = await startControlPlane({
        kubernetesMinor: server.minor,
        apiServerFlags: server.flags,
      });
      const { proxy, client, close } = viaProxy(cp);
      const watchLists = () =>
        proxy.requests.filter((r) => r.verb === "watch" && /sendInitialEvents=true/.test(r.query))
          .length;
      try {
        await client.create(Namespaces, { metadata: { name: "nowl" } });
        await client.create(Pods, pod("nowl", "a"));
        const from = proxy.requests.length;
        await informerRun(client, "nowl", async (inf, seen) => {
          assert.deepEqual(seen, ["add*:a"]);
          await client.create(Pods, pod("nowl", "b"));
          await waitFor("b added", () => seen.includes("add:b"), 30_000);
          assert.equal(inf.stats.watchListFallbacks, 1);
          assert.equal(inf.stats.watchListSyncs, 0);
          assert.equal(inf.stats.lists, 1);
          assert.deepEqual(podReads({ ...proxy, requests: proxy.requests.slice(from) }), [
            "watch-list:422",
            "list:200",
            "watch:200",
          ]);
          // Writes the informer does not watch move etcd past its resourceVersion; the API server
          // restarts on an etcd compacted since, so the watch resumes into 410 Gone and the
          // informer takes the state again: LIST then WATCH, and no watch-list attempt.
          await client.create(Namespaces, { metadata: { name: "elsewhere" } });
          await client.create(Pods, pod("elsewhere", "x"));
          await client.create(Pods, pod("elsewhere", "y"));
          await cp.stopApiServer();
          await cp.compactEtcd();
          await cp.startApiServer();
          await client.create(Pods, pod("nowl", "d"));
          await waitFor("relisted", () => inf.stats.lists === 2, 60_000);
          await waitFor("d added", () => seen.includes("add:d"), 30_000);
          assert.equal(watchLists(), 1, "the relist asked for a watch-list again");
          assert.equal(inf.stats.relistsAfterGone, 1);
          assert.equal(inf.stats.watchListSkips, 1);
        });
        // Another informer of the same client (the operator shares one) lists at once too.
        await informerRun(client, "nowl", (inf) => {
          assert.equal(inf.stats.watchListSkips, 1);
          assert.equal(inf.stats.lists, 1);
          assert.equal(inf.size, 3, "a, b and d");
          return Promise.resolve();
        });
        assert.equal(watchLists(), 1);
      } finally {
        close();
        await proxy.close();
        await cp.stop();
      }
    },
  });
}
