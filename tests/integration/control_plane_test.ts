/**
 * Proves the test control plane behaves like the cluster the operator will meet: CRDs served,
 * RBAC enforced, data surviving an apiserver restart, and 410 Gone after etcd compaction.
 */
import assert from "node:assert/strict";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { waitUntil } from "../harness/wait.ts";

/** The project's own CRDs (generated from common/apis/v1), as deployed. */
const CRD_DIR = new URL("../../config/crd/bases/", import.meta.url).pathname;

interface Condition {
  type: string;
  status: string;
}

async function kubectlJson(cp: ControlPlane, args: string[]): Promise<Record<string, unknown>> {
  const res = await cp.kubectl([...args, "-o", "json"]);
  assert.equal(res.code, 0, `kubectl ${args.join(" ")}: ${res.stderr}`);
  return JSON.parse(res.stdout);
}

function metadataOf(obj: Record<string, unknown>): Record<string, string> {
  return obj.metadata as Record<string, string>;
}

/** The first JSON line of a watch response, read with a deadline. */
async function firstWatchEvent(res: Response): Promise<Record<string, unknown>> {
  assert.ok(res.body);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  try {
    while (!buffered.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += value;
    }
  } finally {
    await reader.cancel();
  }
  return JSON.parse(buffered.split("\n")[0]);
}

Deno.test("test control plane", async (t) => {
  const cp = await startControlPlane({ crdDir: CRD_DIR });
  try {
    await t.step("installs the project's CRDs and they are Established", async () => {
      const expected: string[] = [];
      for await (const entry of Deno.readDir(CRD_DIR)) {
        // Files are named <group>_<plural>.yaml; the CRD is named <plural>.<group>.
        const m = entry.name.match(/^(.+)_([^_]+)\.yaml$/);
        if (m) expected.push(`${m[2]}.${m[1]}`);
      }
      assert.ok(expected.length > 0);
      for (const name of expected) {
        const crd = await kubectlJson(cp, ["get", "crd", name]);
        const conditions = (crd.status as { conditions: Condition[] }).conditions;
        const established = conditions.find((c) => c.type === "Established");
        assert.equal(established?.status, "True", `${name} not Established`);
      }
      const list = await cp.kubectl(["get", "cocoonsets", "--all-namespaces"]);
      assert.equal(list.code, 0, list.stderr);
    });

    await t.step("creates pods in a fresh namespace without a default ServiceAccount", async () => {
      const manifest = {
        apiVersion: "v1",
        kind: "List",
        items: [
          { apiVersion: "v1", kind: "Namespace", metadata: { name: "pods-ns" } },
          {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: "p", namespace: "pods-ns" },
            spec: { containers: [{ name: "c", image: "example.invalid/none:1" }] },
          },
        ],
      };
      const res = await cp.kubectl(["create", "-f", "-"], { stdin: JSON.stringify(manifest) });
      assert.equal(res.code, 0, res.stderr);
      const pod = await kubectlJson(cp, ["get", "pod", "p", "-n", "pods-ns"]);
      assert.equal(metadataOf(pod).name, "p");
      assert.equal((pod.status as { phase: string }).phase, "Pending");
    });

    await t.step("enforces RBAC for a service account", async () => {
      const kubeconfig = await cp.serviceAccountKubeconfig("rbac-ns", "reader");
      const denied = await cp.kubectl(["get", "pods", "-n", "rbac-ns"], { kubeconfig });
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /forbidden/i);
      assert.match(denied.stderr, /system:serviceaccount:rbac-ns:reader/);

      const grant = {
        apiVersion: "v1",
        kind: "List",
        items: [
          {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "Role",
            metadata: { name: "pod-reader", namespace: "rbac-ns" },
            rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] }],
          },
          {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "RoleBinding",
            metadata: { name: "pod-reader", namespace: "rbac-ns" },
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-reader" },
            subjects: [{ kind: "ServiceAccount", name: "reader", namespace: "rbac-ns" }],
          },
        ],
      };
      const applied = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(grant) });
      assert.equal(applied.code, 0, applied.stderr);
      // The authorizer reads bindings from an informer, so the grant lands a moment later.
      const allowed = await waitUntil(async () => {
        const res = await cp.kubectl(["get", "pods", "-n", "rbac-ns", "-o", "json"], {
          kubeconfig,
        });
        return res.code === 0 ? res : undefined;
      }, { timeoutMs: 15_000, what: "RoleBinding to take effect" });
      assert.equal(JSON.parse(allowed.stdout).kind, "List");

      const elsewhere = await cp.kubectl(["get", "pods", "-n", "default"], { kubeconfig });
      assert.notEqual(elsewhere.code, 0);
      assert.match(elsewhere.stderr, /forbidden/i);
    });

    await t.step("keeps data across an apiserver restart", async () => {
      const created = await kubectlJson(cp, [
        "create",
        "configmap",
        "survivor",
        "-n",
        "default",
        "--from-literal=k=v",
      ]);
      await cp.restartApiServer();
      const after = await kubectlJson(cp, ["get", "configmap", "survivor", "-n", "default"]);
      assert.equal(metadataOf(after).uid, metadataOf(created).uid);
      assert.deepEqual(after.data, { k: "v" });
    });

    await t.step("answers 410 Gone to a watch from a compacted resourceVersion", async () => {
      const created = await kubectlJson(cp, [
        "create",
        "configmap",
        "compacted",
        "-n",
        "default",
        "--from-literal=n=0",
      ]);
      const oldVersion = metadataOf(created).resourceVersion;
      for (const n of [1, 2, 3]) {
        const res = await cp.kubectl([
          "patch",
          "configmap",
          "compacted",
          "-n",
          "default",
          "--type=merge",
          `-p={"data":{"n":"${n}"}}`,
        ]);
        assert.equal(res.code, 0, res.stderr);
      }
      await cp.compactEtcd();

      const client = Deno.createHttpClient({
        caCerts: [cp.caCertPem],
        cert: cp.adminCertPem,
        key: cp.adminKeyPem,
      });
      try {
        const url = `${cp.server}/api/v1/namespaces/default/configmaps?watch=true` +
          `&resourceVersion=${oldVersion}&fieldSelector=metadata.name%3Dcompacted`;
        const res = await fetch(url, { client, signal: AbortSignal.timeout(30_000) });
        // The apiserver accepts the watch, then sends one ERROR event carrying the 410 Status.
        assert.equal(res.status, 200);
        const event = await firstWatchEvent(res);
        assert.equal(event.type, "ERROR");
        const status = event.object as { kind: string; code: number; reason: string };
        assert.equal(status.kind, "Status");
        assert.equal(status.code, 410);
        assert.equal(status.reason, "Expired");

        const list = await fetch(
          `${cp.server}/api/v1/namespaces/default/configmaps?resourceVersion=${oldVersion}` +
            "&resourceVersionMatch=Exact",
          { client, signal: AbortSignal.timeout(30_000) },
        );
        assert.equal(list.status, 410);
        assert.equal((await list.json()).reason, "Expired");
      } finally {
        client.close();
      }
    });
  } finally {
    await cp.stop();
  }
  // stop() is idempotent and leaves nothing behind.
  await cp.stop();
  await assert.rejects(Deno.stat(cp.dataDir), Deno.errors.NotFound);
});

Deno.test("with the watch cache on, watch-list streams end with an initial-events BOOKMARK", async () => {
  const cp = await startControlPlane({ crdDir: "", watchCache: true });
  const client = Deno.createHttpClient({
    caCerts: [cp.caCertPem],
    cert: cp.adminCertPem,
    key: cp.adminKeyPem,
  });
  try {
    const url = `${cp.server}/api/v1/namespaces?watch=true&sendInitialEvents=true` +
      "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    const res = await fetch(url, { client, signal: AbortSignal.timeout(30_000) });
    assert.equal(res.status, 200);
    assert.ok(res.body);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    const seen: string[] = [];
    let buffered = "";
    let bookmark: Record<string, unknown> | undefined;
    try {
      while (!bookmark) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += value;
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines.filter((l) => l.trim())) {
          const event = JSON.parse(line);
          seen.push(event.type);
          if (event.type === "BOOKMARK") bookmark = event.object;
        }
      }
    } finally {
      await reader.cancel();
    }
    assert.ok(bookmark, `no BOOKMARK after ${seen.join(",")}`);
    const annotations = (bookmark.metadata as { annotations?: Record<string, string> }).annotations;
    assert.equal(annotations?.["k8s.io/initial-events-end"], "true");
    assert.ok(seen.includes("ADDED"), "initial namespaces were streamed first");
  } finally {
    client.close();
    await cp.stop();
  }
});
