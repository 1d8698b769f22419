/**
 * API-server semantics the reconcilers rely on, written once and run twice: against the
 * in-memory fake (kube/testing/fake_test.ts) and against a real kube-apiserver
 * (tests/integration/kube_runtime_test.ts, watch_cache_test.ts). A case that passes on one and fails on the other
 * is a fake that lies.
 */
import assert from "node:assert/strict";
import { type Client, INITIAL_EVENTS_END_ANNOTATION } from "../../kube/client.ts";
import { type Binding, Nodes, type Pod, Pods } from "../../kube/core.ts";
import {
  ApiError,
  apiErrorOf,
  isAlreadyExists,
  isConflict,
  isGone,
  isInvalid,
  isNotFound,
} from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { resourceType } from "../../kube/resource.ts";

/** A CocoonSet as far as these cases need it (the real CRD must be installed). */
interface Widget extends KubeObject {
  spec: { agent: { image: string; replicas?: number }; nodePool?: string };
  status?: { phase?: string; observedGeneration?: number };
}

const Widgets = resourceType<Widget>({
  group: "cocoonset.cocoonstack.io",
  version: "v1",
  kind: "CocoonSet",
  plural: "cocoonsets",
  namespaced: true,
  statusSubresource: true,
});

export interface SemanticsCase {
  name: string;
  fn(client: Client, namespace: string): Promise<void>;
}

function widget(ns: string, name: string, extra: Partial<Widget> = {}): Widget {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: ns },
    spec: { agent: { image: "ghcr.io/example/agent:1" } },
    ...extra,
  };
}

async function rejects(p: Promise<unknown>, check: (e: unknown) => boolean, what: string) {
  try {
    await p;
  } catch (err) {
    assert.ok(check(err), `${what}: unexpected error ${err}`);
    return err;
  }
  assert.fail(`${what}: expected an error`);
}

async function nextEvent<T>(it: AsyncIterator<T>, deadlineMs = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("no watch event before the deadline")), deadlineMs);
  });
  try {
    const r = await Promise.race([it.next(), timeout]);
    if (r.done) throw new Error("watch ended");
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}

/** Paths of fields holding undefined (a JSON document has none). */
function undefinedPaths(v: unknown, path = ""): string[] {
  if (v === null || typeof v !== "object") return [];
  return Object.entries(v).flatMap(([k, x]) =>
    x === undefined ? [`${path}.${k}`] : undefinedPaths(x, `${path}.${k}`)
  );
}

export const semanticsCases: SemanticsCase[] = [
  {
    name: "create fills system fields, drops status, starts at generation 1",
    async fn(c, ns) {
      const created = await c.create(
        Widgets,
        widget(ns, "w1", { status: { phase: "Running" } }),
      );
      assert.ok(created.metadata.uid);
      assert.ok(created.metadata.creationTimestamp);
      assert.ok(created.metadata.resourceVersion);
      assert.equal(created.metadata.generation, 1);
      assert.equal(created.status, undefined);
      const got = await c.get(Widgets, ns, "w1");
      assert.equal(got.metadata.uid, created.metadata.uid);
      assert.equal(got.metadata.resourceVersion, created.metadata.resourceVersion);
    },
  },
  {
    name: "NotFound and AlreadyExists are classified and name the object",
    async fn(c, ns) {
      const err = await rejects(c.get(Widgets, ns, "missing"), isNotFound, "get missing");
      assert.match(String(err), /missing/);
      await c.create(Widgets, widget(ns, "dup"));
      await rejects(c.create(Widgets, widget(ns, "dup")), isAlreadyExists, "create twice");
      await rejects(c.delete(Widgets, ns, "missing"), isNotFound, "delete missing");
      await rejects(
        c.patch(Widgets, ns, "missing", "merge", { metadata: { labels: { a: "b" } } }),
        isNotFound,
        "patch missing",
      );
    },
  },
  {
    name: "stale resourceVersion conflicts; fresh one updates",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w2"));
      const v2 = await c.update(Widgets, {
        ...v1,
        metadata: { ...v1.metadata, labels: { x: "1" } },
      });
      assert.notEqual(v2.metadata.resourceVersion, v1.metadata.resourceVersion);
      await rejects(
        c.update(Widgets, { ...v1, metadata: { ...v1.metadata, labels: { x: "2" } } }),
        isConflict,
        "stale update",
      );
      const v3 = await c.update(Widgets, {
        ...v2,
        metadata: { ...v2.metadata, labels: { x: "3" } },
      });
      assert.equal(v3.metadata.labels?.x, "3");
    },
  },
  {
    name: "generation moves with spec only",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w3"));
      const labelled = await c.patch(Widgets, ns, "w3", "merge", {
        metadata: { labels: { a: "b" }, annotations: { note: "x" } },
      });
      assert.equal(labelled.metadata.generation, 1);
      const withStatus = await c.patch(Widgets, ns, "w3", "merge", {
        status: { phase: "Running", observedGeneration: 1 },
      }, { subresource: "status" });
      assert.equal(withStatus.metadata.generation, 1);
      assert.equal(withStatus.status?.phase, "Running");
      const specChanged = await c.patch(Widgets, ns, "w3", "merge", {
        spec: { agent: { replicas: 2 } },
      });
      assert.equal(specChanged.metadata.generation, 2);
      assert.equal(specChanged.spec.agent.replicas, 2);
      assert.equal(v1.metadata.uid, specChanged.metadata.uid);
    },
  },
  {
    name: "status subresource isolation both ways",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w4"));
      const s = await c.updateStatus(Widgets, {
        ...v1,
        metadata: { ...v1.metadata, labels: { ignored: "yes" } },
        spec: { agent: { image: "ignored:2" } },
        status: { phase: "Scaling" },
      });
      assert.equal(s.status?.phase, "Scaling");
      assert.equal(s.metadata.labels?.ignored, undefined);
      assert.equal(s.spec.agent.image, "ghcr.io/example/agent:1");
      const u = await c.update(Widgets, { ...s, status: { phase: "Failed" } });
      assert.equal(u.status?.phase, "Scaling");
      const p = await c.patch(Widgets, ns, "w4", "merge", { status: { phase: "Failed" } });
      assert.equal(p.status?.phase, "Scaling");
    },
  },
  {
    name: "a write that changes nothing keeps the resourceVersion",
    async fn(c, ns) {
      const v1 = await c.create(
        Widgets,
        widget(ns, "w5", { metadata: { name: "w5", namespace: ns, labels: { a: "1" } } }),
      );
      const same = await c.patch(Widgets, ns, "w5", "merge", { metadata: { labels: { a: "1" } } });
      assert.equal(same.metadata.resourceVersion, v1.metadata.resourceVersion);
    },
  },
  {
    name: "a field set to undefined is not on the wire: a write adding only that changes nothing",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w5u"));
      const updated = await c.update(Widgets, {
        ...v1,
        metadata: { ...v1.metadata, labels: undefined },
        spec: { ...v1.spec, nodePool: undefined },
      });
      assert.equal(updated.metadata.resourceVersion, v1.metadata.resourceVersion, "update");
      assert.equal(updated.metadata.generation, 1);
      const patched = await c.patch(Widgets, ns, "w5u", "merge", {
        spec: { agent: { replicas: undefined } },
      });
      assert.equal(patched.metadata.resourceVersion, v1.metadata.resourceVersion, "patch");
      const got = await c.get(Widgets, ns, "w5u");
      assert.equal(JSON.stringify(got), JSON.stringify(v1));
      assert.deepEqual(undefinedPaths(got), []);
    },
  },
  {
    name: "finalizers hold a deleted object until the last one is removed",
    async fn(c, ns) {
      await c.create(
        Widgets,
        widget(ns, "w6", {
          metadata: { name: "w6", namespace: ns, finalizers: ["example.com/hold"] },
        }),
      );
      const marked = await c.delete(Widgets, ns, "w6");
      assert.ok(marked, "delete returns the marked object");
      assert.ok(marked.metadata.deletionTimestamp);
      assert.equal(marked.metadata.generation, 2, "marking for deletion bumps generation");
      const still = await c.get(Widgets, ns, "w6");
      assert.ok(still.metadata.deletionTimestamp);
      const again = await c.delete(Widgets, ns, "w6");
      assert.equal(again?.metadata.deletionTimestamp, marked.metadata.deletionTimestamp);
      await c.patch(Widgets, ns, "w6", "json", [
        { op: "test", path: "/metadata/finalizers/0", value: "example.com/hold" },
        { op: "remove", path: "/metadata/finalizers" },
      ]);
      await rejects(c.get(Widgets, ns, "w6"), isNotFound, "finalized object is gone");
    },
  },
  {
    name: "an object without finalizers is gone at once",
    async fn(c, ns) {
      await c.create(Widgets, widget(ns, "w7"));
      assert.equal(await c.delete(Widgets, ns, "w7"), undefined);
      await rejects(c.get(Widgets, ns, "w7"), isNotFound, "deleted");
    },
  },
  {
    name: "merge patch null deletes a key; failing JSON patch test is Invalid",
    async fn(c, ns) {
      await c.create(
        Widgets,
        widget(ns, "w8", {
          metadata: { name: "w8", namespace: ns, annotations: { keep: "1", drop: "2" } },
        }),
      );
      const p = await c.patch(Widgets, ns, "w8", "merge", {
        metadata: { annotations: { drop: null } },
      });
      assert.deepEqual(p.metadata.annotations, { keep: "1" });
      await rejects(
        c.patch(Widgets, ns, "w8", "json", [{
          op: "test",
          path: "/metadata/annotations/keep",
          value: "9",
        }]),
        (e) => isInvalid(e) || (e instanceof Error && /test/i.test(e.message)),
        "failed test op",
      );
      const j = await c.patch(Widgets, ns, "w8", "json", [
        { op: "add", path: "/metadata/labels", value: { tier: "a" } },
        { op: "replace", path: "/spec/agent/image", value: "img:2" },
      ]);
      assert.equal(j.metadata.labels?.tier, "a");
      assert.equal(j.spec.agent.image, "img:2");
      assert.equal(j.metadata.generation, 2);
    },
  },
  {
    name: "merge patch with a stale resourceVersion conflicts",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w9"));
      await c.patch(Widgets, ns, "w9", "merge", { metadata: { labels: { a: "1" } } });
      await rejects(
        c.patch(Widgets, ns, "w9", "merge", {
          metadata: { resourceVersion: v1.metadata.resourceVersion, labels: { a: "2" } },
        }),
        isConflict,
        "stale patch",
      );
    },
  },
  {
    name: "delete preconditions",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w10"));
      await rejects(
        c.delete(Widgets, ns, "w10", {
          preconditions: { uid: "00000000-0000-0000-0000-000000000000" },
        }),
        isConflict,
        "wrong uid",
      );
      await c.delete(Widgets, ns, "w10", { preconditions: { uid: v1.metadata.uid } });
      await rejects(c.get(Widgets, ns, "w10"), isNotFound, "deleted");
    },
  },
  {
    name: "a delete held to a resourceVersion conflicts once the object changed",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "w10rv"));
      const v2 = await c.patch(Widgets, ns, "w10rv", "merge", { metadata: { labels: { r: "2" } } });
      await rejects(
        c.delete(Widgets, ns, "w10rv", {
          preconditions: { resourceVersion: v1.metadata.resourceVersion },
        }),
        isConflict,
        "stale resourceVersion",
      );
      await c.get(Widgets, ns, "w10rv");
      await c.delete(Widgets, ns, "w10rv", {
        preconditions: { resourceVersion: v2.metadata.resourceVersion },
      });
      await rejects(c.get(Widgets, ns, "w10rv"), isNotFound, "deleted");
    },
  },
  {
    name: "list filters by label selector and field",
    async fn(c, ns) {
      const mk = (name: string, labels: Record<string, string>) =>
        c.create(Widgets, widget(ns, name, { metadata: { name, namespace: ns, labels } }));
      await mk("l1", { app: "a", tier: "x" });
      await mk("l2", { app: "a", tier: "y" });
      await mk("l3", { app: "b" });
      const names = async (opts: Parameters<Client["list"]>[1]) =>
        (await c.list(Widgets, { namespace: ns, ...opts })).items.map((i) => i.metadata.name);
      assert.deepEqual(await names({ labelSelector: { app: "a" } }), ["l1", "l2"]);
      assert.deepEqual(await names({ labelSelector: "app=a,tier!=x" }), ["l2"]);
      assert.deepEqual(await names({ labelSelector: "tier in (x,y)" }), ["l1", "l2"]);
      assert.deepEqual(await names({ labelSelector: "!tier" }), ["l3"]);
      assert.deepEqual(await names({ labelSelector: "tier" }), ["l1", "l2"]);
      assert.deepEqual(await names({ matchingFields: { "metadata.name": "l3" } }), ["l3"]);
      const list = await c.list(Widgets, { namespace: ns });
      assert.ok(list.metadata.resourceVersion);
      const page = await c.list(Widgets, { namespace: ns, limit: 2 });
      assert.equal(page.items.length, 2);
      assert.ok(page.metadata.continue);
      const rest = await c.list(Widgets, {
        namespace: ns,
        limit: 2,
        continue: page.metadata.continue,
      });
      assert.deepEqual(rest.items.map((i) => i.metadata.name), ["l3"]);
    },
  },
  {
    name: "field selectors work only on the fields the server indexes for the kind",
    async fn(c, ns) {
      await c.create(Widgets, widget(ns, "fs1"));
      const badRequest = (e: unknown) =>
        apiErrorOf(e)?.code === 400 && /field label not supported/.test(String(e));
      // A custom resource without selectableFields offers metadata.name and metadata.namespace.
      await rejects(
        c.list(Widgets, { namespace: ns, fieldSelector: "spec.nodePool=default" }),
        badRequest,
        "list by a spec field of a custom resource",
      );
      const stream = c.watch(Widgets, { namespace: ns, fieldSelector: "spec.nodePool=default" });
      await rejects(stream[Symbol.asyncIterator]().next(), badRequest, "watch by a spec field");
      const byNs = await c.list(Widgets, {
        namespace: ns,
        fieldSelector: `metadata.namespace=${ns}`,
      });
      assert.deepEqual(byNs.items.map((w) => w.metadata.name), ["fs1"]);
      // Pods add their own (spec.nodeName, status.phase, …) but not arbitrary paths.
      const pods = await c.list(Pods, { namespace: ns, fieldSelector: "spec.nodeName=n1" });
      assert.deepEqual(pods.items, []);
      await rejects(
        c.list(Pods, { namespace: ns, fieldSelector: "spec.priority=1" }),
        badRequest,
        "list pods by an unindexed field",
      );
    },
  },
  {
    name: "list pages come from the first page's snapshot and share its resourceVersion",
    async fn(c, ns) {
      for (const name of ["pa", "pb", "pc"]) await c.create(Widgets, widget(ns, name));
      const first = await c.list(Widgets, { namespace: ns, limit: 2 });
      assert.deepEqual(first.items.map((i) => i.metadata.name), ["pa", "pb"]);
      // Changes after the first page are not in later pages: a watch from the list's
      // resourceVersion reports them instead, so an informer neither misses nor repeats one.
      await c.create(Widgets, widget(ns, "pd"));
      await c.delete(Widgets, ns, "pc");
      const names = first.items.map((i) => i.metadata.name);
      let cont = first.metadata.continue;
      while (cont) {
        const page = await c.list(Widgets, { namespace: ns, limit: 2, continue: cont });
        assert.equal(page.metadata.resourceVersion, first.metadata.resourceVersion);
        names.push(...page.items.map((i) => i.metadata.name));
        cont = page.metadata.continue;
      }
      assert.deepEqual(names, ["pa", "pb", "pc"]);
    },
  },
  {
    name: "no finalizer may be added to an object being deleted; removing one still works",
    async fn(c, ns) {
      await c.create(
        Widgets,
        widget(ns, "fd", {
          metadata: { name: "fd", namespace: ns, finalizers: ["example.com/a"] },
        }),
      );
      await c.delete(Widgets, ns, "fd");
      await rejects(
        c.patch(Widgets, ns, "fd", "merge", {
          metadata: { finalizers: ["example.com/a", "example.com/b"] },
        }),
        isInvalid,
        "new finalizer on a deleting object",
      );
      const cur = await c.get(Widgets, ns, "fd");
      await rejects(
        c.update(Widgets, {
          ...cur,
          metadata: { ...cur.metadata, finalizers: ["example.com/b"] },
        }),
        isInvalid,
        "swapping in a new finalizer",
      );
      await c.patch(Widgets, ns, "fd", "merge", { metadata: { finalizers: null } });
      await rejects(c.get(Widgets, ns, "fd"), isNotFound, "finalized object is gone");
    },
  },
  {
    name: "a custom resource update needs a resourceVersion; a patch does not",
    async fn(c, ns) {
      const v1 = await c.create(Widgets, widget(ns, "u1"));
      const { resourceVersion: _rv, ...meta } = v1.metadata;
      await rejects(
        c.update(Widgets, { ...v1, metadata: { ...meta, labels: { a: "1" } } }),
        isInvalid,
        "unconditional update",
      );
      const p = await c.patch(Widgets, ns, "u1", "merge", { metadata: { labels: { a: "1" } } });
      assert.equal(p.metadata.labels?.a, "1");
      await c.delete(Widgets, ns, "u1");
      await rejects(
        c.update(Widgets, { ...v1, metadata: { ...meta } }),
        isNotFound,
        "update of a deleted object",
      );
    },
  },
  {
    name: "watch from a list's resourceVersion sees every later change in order",
    async fn(c, ns) {
      const list = await c.list(Widgets, { namespace: ns });
      const ac = new AbortController();
      const it = c.watch(Widgets, {
        namespace: ns,
        resourceVersion: list.metadata.resourceVersion,
        signal: ac.signal,
      })[
        Symbol.asyncIterator
      ]();
      try {
        await c.create(Widgets, widget(ns, "wa"));
        await c.patch(Widgets, ns, "wa", "merge", { metadata: { labels: { a: "1" } } });
        await c.delete(Widgets, ns, "wa");
        const seen = [];
        for (let i = 0; i < 3; i++) {
          const ev = await nextEvent(it);
          seen.push(`${ev.type}:${(ev.object as KubeObject).metadata.name}`);
        }
        assert.deepEqual(seen, ["ADDED:wa", "MODIFIED:wa", "DELETED:wa"]);
      } finally {
        ac.abort();
        await it.return?.();
      }
    },
  },
  {
    name:
      "a watch-list stream sends the state as ADDED, then an initial-events-end bookmark, then changes",
    async fn(c, ns) {
      await c.create(Widgets, widget(ns, "wl-a"));
      await c.create(Widgets, widget(ns, "wl-b"));
      const ac = new AbortController();
      const it = c.watch(Widgets, {
        namespace: ns,
        sendInitialEvents: true,
        resourceVersionMatch: "NotOlderThan",
        allowWatchBookmarks: true,
        signal: ac.signal,
      })[Symbol.asyncIterator]();
      try {
        const initial: string[] = [];
        let ev = await nextEvent(it);
        for (; ev.type === "ADDED"; ev = await nextEvent(it)) {
          initial.push(ev.object.metadata.name ?? "");
        }
        assert.deepEqual(initial.sort(), ["wl-a", "wl-b"]);
        assert.equal(ev.type, "BOOKMARK");
        assert.equal(ev.object.metadata.annotations?.[INITIAL_EVENTS_END_ANNOTATION], "true");
        assert.ok(ev.object.metadata.resourceVersion, "the bookmark carries the state's version");
        await c.create(Widgets, widget(ns, "wl-c"));
        do ev = await nextEvent(it); while (ev.type === "BOOKMARK");
        assert.equal(`${ev.type}:${(ev.object as KubeObject).metadata.name}`, "ADDED:wl-c");
      } finally {
        ac.abort();
        await it.return?.();
      }
    },
  },
  {
    name:
      "a watch-list stream needs resourceVersionMatch=NotOlderThan; without bookmarks it has no end mark",
    async fn(c, ns) {
      for (
        const opts of [
          { sendInitialEvents: true, allowWatchBookmarks: true },
          { resourceVersionMatch: "NotOlderThan" as const, allowWatchBookmarks: true },
        ]
      ) {
        const it = c.watch(Widgets, { namespace: ns, ...opts })[Symbol.asyncIterator]();
        try {
          await rejects(it.next(), isInvalid, `watch with ${JSON.stringify(opts)}`);
        } finally {
          await it.return?.();
        }
      }
      await c.create(Widgets, widget(ns, "wn-a"));
      const ac = new AbortController();
      const it = c.watch(Widgets, {
        namespace: ns,
        sendInitialEvents: true,
        resourceVersionMatch: "NotOlderThan",
        signal: ac.signal,
      })[Symbol.asyncIterator]();
      try {
        const first = await nextEvent(it);
        assert.equal(`${first.type}:${(first.object as KubeObject).metadata.name}`, "ADDED:wn-a");
        await c.create(Widgets, widget(ns, "wn-b"));
        const next = await nextEvent(it);
        assert.equal(`${next.type}:${(next.object as KubeObject).metadata.name}`, "ADDED:wn-b");
      } finally {
        ac.abort();
        await it.return?.();
      }
    },
  },
  {
    name: "a label-filtered watch reports objects entering and leaving the filter",
    async fn(c, ns) {
      await c.create(Widgets, widget(ns, "wf"));
      const list = await c.list(Widgets, { namespace: ns, labelSelector: "pick=yes" });
      const ac = new AbortController();
      const it = c.watch(Widgets, {
        namespace: ns,
        labelSelector: "pick=yes",
        resourceVersion: list.metadata.resourceVersion,
        signal: ac.signal,
      })[Symbol.asyncIterator]();
      try {
        await c.patch(Widgets, ns, "wf", "merge", { metadata: { labels: { pick: "yes" } } });
        await c.patch(Widgets, ns, "wf", "merge", { metadata: { labels: { pick: "no" } } });
        const a = await nextEvent(it);
        const b = await nextEvent(it);
        assert.deepEqual([a.type, b.type], ["ADDED", "DELETED"]);
      } finally {
        ac.abort();
        await it.return?.();
      }
    },
  },
  {
    name: "pods: status starts Pending; unbound pods go at once, bound pods wait for their kubelet",
    async fn(c, ns) {
      const pod = (name: string, nodeName?: string): Pod => ({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: ns },
        spec: {
          containers: [{ name: "agent", image: "ghcr.io/cocoonstack/placeholder:latest" }],
          terminationGracePeriodSeconds: 1,
          ...(nodeName ? { nodeName } : {}),
        },
        status: { phase: "Running" },
      });
      const created = await c.create(Pods, pod("p-unbound"));
      assert.equal(created.status?.phase, "Pending");
      assert.equal(await c.delete(Pods, ns, "p-unbound"), undefined);
      await rejects(c.get(Pods, ns, "p-unbound"), isNotFound, "unbound pod deleted");

      await c.create(Pods, pod("p-bound", "node-a"));
      const terminating = await c.delete(Pods, ns, "p-bound");
      assert.ok(terminating?.metadata.deletionTimestamp);
      assert.equal(terminating?.metadata.deletionGracePeriodSeconds, 1);
      assert.ok((await c.get(Pods, ns, "p-bound")).metadata.deletionTimestamp);
      await rejects(c.create(Pods, pod("p-bound", "node-a")), isAlreadyExists, "terminating name");
      assert.equal(await c.delete(Pods, ns, "p-bound", { gracePeriodSeconds: 0 }), undefined);
      await rejects(c.get(Pods, ns, "p-bound"), isNotFound, "confirmed delete");
    },
  },
  {
    name: "nodes keep their registered status; pods/binding assigns a node exactly once",
    async fn(c, ns) {
      const nodeName = `node-${ns}`;
      const node = await c.create(Nodes, {
        metadata: { name: nodeName, labels: { "cocoonstack.io/pool": "default" } },
        status: { capacity: { pods: "2" }, allocatable: { pods: "2" } },
      });
      assert.equal(node.status?.capacity?.pods, "2");
      await c.create(Pods, {
        metadata: { name: "p-bind", namespace: ns },
        spec: { containers: [{ name: "agent", image: "ghcr.io/cocoonstack/placeholder:latest" }] },
      });
      const binding = (pod: string, target: string): Binding => ({
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name: pod, namespace: ns },
        target: { apiVersion: "v1", kind: "Node", name: target },
      });
      await c.createSubresource(Pods, ns, "p-bind", "binding", binding("p-bind", nodeName));
      const bound = await c.get(Pods, ns, "p-bind");
      assert.equal(bound.spec?.nodeName, nodeName);
      const scheduled = bound.status?.conditions?.find((cd) => cd.type === "PodScheduled");
      assert.equal(scheduled?.status, "True");
      assert.equal(bound.status?.phase, "Pending");
      await rejects(
        c.createSubresource(Pods, ns, "p-bind", "binding", binding("p-bind", "elsewhere")),
        isConflict,
        "second binding",
      );
      assert.equal((await c.get(Pods, ns, "p-bind")).spec?.nodeName, nodeName);
      await rejects(
        c.createSubresource(Pods, ns, "p-none", "binding", binding("p-none", nodeName)),
        isNotFound,
        "binding a missing pod",
      );
      await rejects(
        c.createSubresource(Pods, ns, "p-bind", "binding", binding("other", nodeName)),
        (e) => e instanceof ApiError && e.code === 400,
        "binding naming another pod",
      );
      await c.delete(Pods, ns, "p-bind", { gracePeriodSeconds: 0 });
      await c.delete(Nodes, "", nodeName);
      await rejects(c.get(Nodes, "", nodeName), isNotFound, "node deleted");
    },
  },
];

/** Watching from a compacted resourceVersion fails with 410 (as an ERROR event or a thrown error). */
export async function expectGoneWatch(c: Client, ns: string, oldRv: string): Promise<void> {
  const ac = new AbortController();
  try {
    const it = c.watch(Widgets, { namespace: ns, resourceVersion: oldRv, signal: ac.signal })[
      Symbol.asyncIterator
    ]();
    let ev;
    try {
      ev = await nextEvent(it);
    } catch (err) {
      assert.ok(isGone(err), `expected 410, got ${err}`);
      return;
    }
    assert.equal(ev.type, "ERROR");
    assert.equal((ev.object as { code?: number }).code, 410);
    await it.return?.();
  } finally {
    ac.abort();
  }
}

export { Widgets };
