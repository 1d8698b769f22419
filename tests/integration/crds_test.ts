/**
 * The generated CRDs (config/crd/bases) against a real kube-apiserver: they install and become
 * Established, reject invalid enums and the CEL-guarded changes with messages naming the field,
 * apply the schema defaults, round-trip a full object unchanged and print the kubectl columns.
 */
import assert from "node:assert/strict";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import {
  DEFAULT_AGENT_MODE,
  DEFAULT_BACKEND,
  DEFAULT_HIBERNATE_POLICY,
  DEFAULT_OS_TYPE,
  DEFAULT_SNAPSHOT_POLICY,
  DEFAULT_TOOLBOX_MODE,
} from "../../common/apis/v1/enums.ts";
import { API_VERSION } from "../../common/apis/v1/groupversion.ts";
import { generateCrdFiles } from "../../scripts/crds.ts";

const CRD_DIR = new URL("../../config/crd/bases/", import.meta.url).pathname;
const NS = "crd-test";

type Obj = Record<string, unknown>;

async function kubectlOk(cp: ControlPlane, args: string[], stdin?: string): Promise<string> {
  const res = await cp.kubectl(args, stdin === undefined ? undefined : { stdin });
  assert.equal(res.code, 0, `kubectl ${args.join(" ")} failed: ${res.stderr}`);
  return res.stdout;
}

async function getJson(cp: ControlPlane, args: string[]): Promise<Obj> {
  return JSON.parse(await kubectlOk(cp, [...args, "-o", "json"]));
}

function cocoonSet(name: string, spec: Obj): Obj {
  return { apiVersion: API_VERSION, kind: "CocoonSet", metadata: { name, namespace: NS }, spec };
}

function hibernation(name: string, pod: string): Obj {
  return {
    apiVersion: API_VERSION,
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  };
}

/** Applies obj with `kubectl create`; returns the failure text (stderr) or "" on success. */
async function create(cp: ControlPlane, obj: Obj): Promise<{ code: number; stderr: string }> {
  const res = await cp.kubectl(["create", "-f", "-"], { stdin: JSON.stringify(obj) });
  return { code: res.code, stderr: res.stderr };
}

Deno.test("generated CRDs on a real API server", async (t) => {
  // The files under test must be the generator's current output, or this test proves nothing.
  for (const [file, text] of generateCrdFiles()) {
    assert.equal(await Deno.readTextFile(CRD_DIR + file), text, `${file} is stale`);
  }
  const cp = await startControlPlane({ crdDir: "" });
  try {
    await t.step("install and become Established", async () => {
      await cp.installCrds(CRD_DIR);
      for (const name of ["cocoonsets", "cocoonhibernations"]) {
        const crd = await getJson(cp, ["get", "crd", `${name}.cocoonset.cocoonstack.io`]);
        const conditions = (crd.status as { conditions: { type: string; status: string }[] })
          .conditions;
        assert.equal(conditions.find((c) => c.type === "Established")?.status, "True", name);
      }
      await kubectlOk(cp, ["create", "namespace", NS]);
    });

    await t.step("invalid enums are rejected with the field named", async () => {
      const res = await create(
        cp,
        cocoonSet("bad-enums", {
          snapshotPolicy: "sometimes",
          agent: { image: "img", os: "plan9" },
        }),
      );
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /spec\.agent\.os: Unsupported value: "plan9"/);
      assert.match(res.stderr, /spec\.snapshotPolicy: Unsupported value: "sometimes"/);
    });

    await t.step("other schema checks name their field", async () => {
      const res = await create(
        cp,
        cocoonSet("bad-fields", {
          agent: { image: "", replicas: -1, probePort: 70000 },
          toolboxes: [{ name: "Not_A_Label" }],
        }),
      );
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /spec\.agent\.image/);
      assert.match(res.stderr, /spec\.agent\.replicas/);
      assert.match(res.stderr, /spec\.agent\.probePort/);
      assert.match(res.stderr, /spec\.toolboxes\[0\]\.name/);
      const missing = await create(cp, cocoonSet("no-agent", {}));
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /spec\.agent: Required value/);
    });

    await t.step("a minimal CocoonSet gets the schema defaults", async () => {
      await kubectlOk(
        cp,
        ["create", "-f", "-"],
        JSON.stringify(cocoonSet("minimal", {
          agent: { image: "img" },
          toolboxes: [{ name: "tb" }],
        })),
      );
      const got = await getJson(cp, ["get", "cocoonset", "-n", NS, "minimal"]);
      assert.deepEqual(got.spec, {
        agent: {
          image: "img",
          backend: DEFAULT_BACKEND,
          mode: DEFAULT_AGENT_MODE,
          os: DEFAULT_OS_TYPE,
          replicas: 0,
        },
        hibernatePolicy: DEFAULT_HIBERNATE_POLICY,
        nodePool: "default",
        snapshotPolicy: DEFAULT_SNAPSHOT_POLICY,
        toolboxes: [{
          name: "tb",
          backend: DEFAULT_BACKEND,
          mode: DEFAULT_TOOLBOX_MODE,
          os: DEFAULT_OS_TYPE,
        }],
      });
    });

    await t.step("a fully specified CocoonSet round-trips unchanged", async () => {
      const spec = {
        suspend: true,
        snapshotPolicy: "main-only",
        hibernatePolicy: "retain",
        nodePool: "gpu",
        snapshotCompatibilityClass: "n2-cascade-lake-v1",
        nodeName: "node-a",
        agent: {
          replicas: 2,
          image: "ghcr.io/cocoonstack/cocoon/ubuntu:24.04",
          mode: "run",
          os: "windows",
          backend: "firecracker",
          connType: "rdp",
          network: "default",
          forcePull: true,
          noDirectIO: true,
          probePort: 3389,
          storage: "100Gi",
          resources: { limits: { cpu: "2", memory: "4Gi" }, requests: { cpu: "500m" } },
          envFrom: [{ prefix: "APP_", configMapRef: { name: "cfg", optional: true } }],
          serviceAccountName: "agent",
        },
        toolboxes: [{
          name: "shell",
          image: "toolbox:latest",
          mode: "static",
          staticIP: "10.0.0.5",
          staticVMID: "vm-1",
          vncPort: 5901,
          os: "android",
          backend: "cloud-hypervisor",
          connType: "vnc",
          storage: 1073741824,
        }],
      };
      await kubectlOk(cp, ["create", "-f", "-"], JSON.stringify(cocoonSet("full", spec)));
      const got = await getJson(cp, ["get", "cocoonset", "-n", NS, "full"]);
      assert.deepEqual(got.spec, spec);
    });

    await t.step("kubectl get cs prints Phase / Ready / Desired / Age", async () => {
      await kubectlOk(cp, [
        "patch",
        "cocoonset",
        "-n",
        NS,
        "minimal",
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify({
          status: { phase: "Running", readyAgents: 1, desiredAgents: 3, readyToolboxes: 0 },
        }),
      ]);
      // The bare short name "cs" also belongs to the built-in componentstatuses, which kubectl
      // prefers (with a warning), exactly as with the Go CRDs; qualified by group it is ours.
      const out = await kubectlOk(cp, ["get", "cs.cocoonset.cocoonstack.io", "-n", NS, "minimal"]);
      const [header, row] = out.trim().split("\n").map((l) => l.trim().split(/\s+/));
      assert.deepEqual(header, ["NAME", "PHASE", "READY", "DESIRED", "AGE"]);
      assert.deepEqual(row.slice(0, 4), ["minimal", "Running", "1", "3"]);
      const bare = await cp.kubectl(["get", "cs", "-n", NS]);
      assert.match(
        bare.stderr,
        /short name "cs" could also match .*cocoonsets\.cocoonset\.cocoonstack\.io/,
      );
      // The category resolves to our resources too.
      assert.match(
        await kubectlOk(cp, ["get", "cocoon", "-n", NS]),
        /cocoonset\.cocoonstack\.io\/minimal/,
      );
    });

    await t.step("an invalid status phase is rejected", async () => {
      const res = await cp.kubectl([
        "patch",
        "cocoonset",
        "-n",
        NS,
        "minimal",
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify({ status: { phase: "Sleeping" } }),
      ]);
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /status\.phase: Unsupported value: "Sleeping"/);
    });

    await t.step("hibernatePolicy=release needs a main-only set (CEL)", async () => {
      const res = await create(
        cp,
        cocoonSet("release-many", {
          hibernatePolicy: "release",
          agent: { image: "i", replicas: 1 },
        }),
      );
      assert.notEqual(res.code, 0);
      assert.match(
        res.stderr,
        /hibernatePolicy=release requires agent\.replicas=0 and no toolboxes/,
      );
      await kubectlOk(
        cp,
        ["create", "-f", "-"],
        JSON.stringify(
          cocoonSet("release-one", { hibernatePolicy: "release", agent: { image: "i" } }),
        ),
      );
    });

    await t.step("snapshotCompatibilityClass cannot change once set (CEL)", async () => {
      const res = await cp.kubectl([
        "patch",
        "cocoonset",
        "-n",
        NS,
        "full",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { snapshotCompatibilityClass: "other" } }),
      ]);
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /snapshotCompatibilityClass is immutable once set/);
      // Setting it where it was unset is allowed.
      await kubectlOk(cp, [
        "patch",
        "cocoonset",
        "-n",
        NS,
        "minimal",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { snapshotCompatibilityClass: "c1" } }),
      ]);
    });

    await t.step("CocoonHibernation: podRef is immutable, desire is not", async () => {
      await kubectlOk(cp, ["create", "-f", "-"], JSON.stringify(hibernation("h1", "pod-a")));
      const res = await cp.kubectl([
        "patch",
        "cocoonhibernation",
        "-n",
        NS,
        "h1",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { podRef: { name: "pod-b" } } }),
      ]);
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /spec\.podRef: Invalid value: .*spec\.podRef is immutable/);
      await kubectlOk(cp, [
        "patch",
        "ch",
        "-n",
        NS,
        "h1",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { desire: "Wake" } }),
      ]);
      const got = await getJson(cp, ["get", "ch", "-n", NS, "h1"]);
      assert.deepEqual(got.spec, { podRef: { name: "pod-a" }, desire: "Wake" });
      const bad = await create(cp, {
        ...hibernation("h2", "pod-a"),
        spec: { podRef: { name: "pod-a" }, desire: "Sleep" },
      });
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /spec\.desire: Unsupported value: "Sleep"/);
      const out = await kubectlOk(cp, ["get", "ch", "-n", NS, "h1"]);
      assert.deepEqual(out.trim().split("\n")[0].trim().split(/\s+/), [
        "NAME",
        "POD",
        "DESIRE",
        "PHASE",
        "AGE",
      ]);
    });
  } finally {
    await cp.stop();
  }
});
