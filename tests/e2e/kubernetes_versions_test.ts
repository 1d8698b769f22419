/**
 * The smoke suite on the two ends of the tested Kubernetes range, 1.33 and 1.37 (the full suites
 * run on 1.35, and on 1.36 where sharding needs it): the operator starts and names the server's
 * release, a set converges, suspends and resumes, a CocoonHibernation hibernates and wakes a
 * sub-agent, and the API server restarts on a compacted etcd under the running operator, which
 * relists and goes on converging. On 1.33 the WatchList feature is off by default: the operator
 * is refused one watch-list round at start and asks no more after that, the relists included.
 *
 * Each release runs where its binaries are (`deno task envtest 1.33`, ENVTEST_BIN_DIR_1_33; the
 * same for 1.37), is skipped with the reason where they are not, and fails under CI without them
 * (tests/harness/kubernetes_versions.ts).
 */
import assert from "node:assert/strict";
import type { CocoonHibernation } from "../../common/apis/v1/mod.ts";
import { CocoonHibernations } from "../../common/apis/v1/resources.ts";
import { KUBERNETES_RELEASES, type KubernetesMinor } from "../../scripts/envtest.ts";
import { releaseAvailability } from "../harness/kubernetes_versions.ts";
import { type Stack, stackTest } from "../harness/stack.ts";
import {
  CONVERGE_MS,
  createSet,
  inPhase,
  patchSpec,
  vmOf,
  waitSet,
} from "../harness/stack_objects.ts";
import { waitUntil } from "../harness/wait.ts";

const NS = "smoke";

/** One JSON log line of the operator. */
interface LogLine {
  level: string;
  message: string;
}

function operatorLog(stack: Stack): LogLine[] {
  const lines: LogLine[] = [];
  for (const raw of stack.operators[0].proc.output.split("\n")) {
    if (!raw.startsWith("{")) continue;
    try {
      const rec = JSON.parse(raw) as { level?: string; message?: string };
      lines.push({ level: (rec.level ?? "").toLowerCase(), message: rec.message ?? "" });
    } catch {
      // A partial line.
    }
  }
  return lines;
}

/** Log lines of the watch-list refusal (the first at info, the later ones at debug). */
function refusals(stack: Stack): LogLine[] {
  return operatorLog(stack).filter((l) =>
    /refused a watch-list stream|watch-list of .* refused too/.test(l.message)
  );
}

/** Debug lines of informers taking their state again after 410 Gone (kube/watcher.ts). */
function relists(stack: Stack): number {
  return operatorLog(stack).filter((l) => /expired \(410 Gone\)/.test(l.message)).length;
}

/** Creates the CocoonHibernation `name` for `pod`, asking to hibernate it. */
async function hibernate(stack: Stack, name: string, pod: string): Promise<void> {
  await stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire: "Hibernate" },
  });
}

async function waitHibernation(
  stack: Stack,
  name: string,
  phase: string,
): Promise<CocoonHibernation> {
  return await waitUntil(async () => {
    const h = await stack.admin.get(CocoonHibernations, NS, name);
    return h.status?.phase === phase && h.status.observedGeneration === h.metadata.generation
      ? h
      : undefined;
  }, { what: `${name} ${phase}`, timeoutMs: CONVERGE_MS, intervalMs: 100 });
}

async function smoke(minor: KubernetesMinor, stack: Stack, t: Deno.TestContext): Promise<void> {
  const release = KUBERNETES_RELEASES[minor].kubernetes;
  const step = async (name: string, fn: () => Promise<void>) => {
    if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
  };
  let tolerated = 0;

  await step(`the operator names the server's release (v${release}), no warning`, () => {
    const lines = operatorLog(stack).filter((l) => l.message.includes("Kubernetes API server"));
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0].level, "info");
    assert.match(lines[0].message, new RegExp(`runs v${release.replaceAll(".", "\\.")}$`));
    return Promise.resolve();
  });

  await stack.namespace(NS);
  let cs = await createSet(stack, NS, "sm", { agent: { replicas: 1 } });
  await step("a set converges: main and one sub-agent", async () => {
    cs = await waitSet(
      stack,
      cs,
      "Running",
      (c) => inPhase("Running")(c) && c.status?.readyAgents === 2,
    );
  });

  await step("suspend, then resume from the snapshots", async () => {
    cs = await patchSpec(stack, cs, { suspend: true });
    cs = await waitSet(stack, cs, "Suspended", inPhase("Suspended"));
    for (const member of [0, 1]) {
      assert.deepEqual(await stack.tagsOf(vmOf(NS, "sm", member)), ["hibernate"]);
    }
    const snapshot = await stack.registry.digestOf(
      `${stack.prefix}/${vmOf(NS, "sm", 1)}`,
      "hibernate",
    );
    cs = await patchSpec(stack, cs, { suspend: false });
    cs = await waitSet(
      stack,
      cs,
      "Running again",
      (c) => inPhase("Running")(c) && c.status?.readyAgents === 2,
    );
    assert.equal((await stack.sim.vm(NS, "sm-1"))?.restoredFrom, snapshot);
  });

  await step("a CocoonHibernation hibernates a sub-agent and wakes it", async () => {
    await hibernate(stack, "park", "sm-1");
    const parked = await waitHibernation(stack, "park", "Hibernated");
    assert.equal(parked.status?.vmName, vmOf(NS, "sm", 1));
    const snapshot = await stack.registry.digestOf(
      `${stack.prefix}/${vmOf(NS, "sm", 1)}`,
      "hibernate",
    );
    assert.ok(snapshot, "the snapshot is in the registry");
    await stack.admin.patch(CocoonHibernations, NS, "park", "merge", { spec: { desire: "Wake" } });
    await waitHibernation(stack, "park", "Active");
    assert.equal((await stack.sim.vm(NS, "sm-1"))?.restoredFrom, snapshot);
    cs = await waitSet(stack, cs, "both agents ready", (c) => c.status?.readyAgents === 2);
  });

  await step(
    "the API server restarts on a compacted etcd; the operator relists and scales the set",
    async () => {
      const refusedBefore = refusals(stack).length;
      const relistsBefore = relists(stack);
      await stack.cp.stopApiServer();
      // Compacted past the resourceVersions the operator holds: its watches resume into 410.
      await stack.cp.compactEtcd();
      await stack.cp.startApiServer();
      cs = await patchSpec(stack, cs, { agent: { replicas: 2 } });
      cs = await waitSet(
        stack,
        cs,
        "Running with two sub-agents",
        (c) => inPhase("Running")(c) && c.status?.readyAgents === 3,
        120_000,
      );
      assert.ok(relists(stack) > relistsBefore, "no informer relisted after the compaction");
      assert.equal(refusals(stack).length, refusedBefore, "a watch-list was asked for again");
      // A restarted kube-apiserver answers 403 until its RBAC caches are filled (the faults suite
      // has the details): those, until the set converged, are forgiven; later ones are not.
      tolerated = await stack.operators[0].forbiddenRequests();
    },
  );

  await step(
    `watch-list: ${
      minor === "1.33" ? "refused once at start, never asked again" : "served, no refusal"
    }`,
    () => {
      const lines = refusals(stack);
      if (minor === "1.33") {
        assert.ok(lines.length >= 1, "1.33 refuses watch-list streams by default");
        assert.equal(lines.filter((l) => l.level === "info").length, 1);
      } else {
        assert.deepEqual(lines, []);
      }
      return Promise.resolve();
    },
  );

  assert.ok(stack.alive(0), `the operator exited:\n${stack.operators[0].proc.output.slice(-3000)}`);
  const forbidden = await stack.operators[0].forbiddenRequests();
  assert.ok(
    forbidden <= tolerated,
    `403s after the API server's warm-up: ${forbidden - tolerated}\n` +
      stack.operators[0].proc.output.slice(-3000),
  );
}

for (const minor of ["1.33", "1.37"] as const) {
  const availability = await releaseAvailability(minor);
  stackTest(
    `e2e: Kubernetes ${minor} smoke: start, converge, suspend/resume, hibernate/wake, API server restart${availability.nameSuffix}`,
    {
      controlPlane: { kubernetesMinor: minor },
      // The refusals of later informers are logged at debug level (kube/watcher.ts).
      operatorEnv: { OPERATOR_LOG_LEVEL: "debug" },
    },
    (stack, t) => smoke(minor, stack, t),
    { ignore: availability.ignore, failWith: availability.missing },
  );
}
