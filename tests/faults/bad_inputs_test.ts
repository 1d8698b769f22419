/**
 * Bad inputs against one running system, next to a healthy CocoonSet: every case must end in a
 * clear answer — the API server refusing the write with a message naming what is wrong, or the
 * operator saying so in an Event or a condition, or (for garbage in annotations the operator
 * owns) the operator writing the value back — while the operator keeps running and the healthy
 * set still converges and scales.
 *
 * The cases are a table (name, what is written, the expected answer). Writes the schema refuses
 * cover invalid enums, types, bounds, patterns, required fields and the CEL rules; the rest pass
 * the schema (there is no admission webhook) and reach the operator: duplicate and integer
 * toolbox names, specs no pod can be built from, a foreign pod holding a set's pod name, garbage
 * rebuild history, unparsable generation stamps, CocoonHibernations naming a pod another request
 * holds, an invalid pod name or a missing pod, and 1 000 replicas.
 *
 * 1 000 replicas: the CRD sets no upper bound, so the answer is the operator's. A sub-agent is
 * bound to its main's node at creation, so seats do not cap it; the clear outcome is that the
 * set converges — Running with 1 001 agents ready — while the healthy set keeps converging next
 * to it, and that its delete then tears all 1 001 pods down.
 *
 * Figure: the number of cases per kind of answer, how long until every answer was seen, and the
 * big set's times.
 */
import assert from "node:assert/strict";
import {
  CocoonHibernations,
  type CocoonSet,
  CocoonSets,
  type CocoonSetSpec,
} from "../../common/apis/v1/mod.ts";
import { findStatusCondition } from "../../common/k8s/condition.ts";
import { ANNOTATION_COCOON_SET_GENERATION, LABEL_COCOON_SET } from "../../common/meta/keys.ts";
import { Pods } from "../../kube/core.ts";
import { errorMessage } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { ANNOTATION_SIM_FAIL } from "../../sim/knobs.ts";
import type { Stack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  conditionOf,
  createSet,
  eventsWith,
  getSet,
  IMAGE,
  inPhase,
  patchSpec,
  waitGone,
  waitSet,
} from "../harness/stack_objects.ts";
import { faultSuite } from "./_support.ts";

const NS = "faults-bad";
const REBUILD_HISTORY = "cocoonset.cocoonstack.io/rebuild-history";
const BIG = 1_000;
/** A valid object name, too long for the label every pod of the set carries. */
const LONG_NAME = `long-name-${"x".repeat(60)}`;

/** An answer cut to a readable length for the figure. */
function short(text: string): string {
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}

/** How a case is answered. */
type Answer = "rejected" | "event" | "condition" | "repaired";

/** One bad input: the write, and a probe that resolves to the answer's text once it shows. */
interface Case {
  name: string;
  answer: Answer;
  apply(): Promise<void>;
  /** The answer as seen (for the figure), or undefined while it has not shown yet. */
  observe(): Promise<string | undefined>;
}

/** A CocoonSet body with the given spec (no defaults filled in). */
function setBody(name: string, spec: unknown): CocoonSet {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonSet",
    metadata: { name, namespace: NS },
    spec: spec as CocoonSetSpec,
  };
}

/** A case the API server refuses: the write must fail as Invalid, its message matching. */
function refused(name: string, write: (stack: Stack) => Promise<unknown>, message: RegExp) {
  return (stack: Stack): Case => {
    let answer: string | undefined;
    return {
      name,
      answer: "rejected",
      async apply() {
        try {
          await write(stack);
        } catch (err) {
          const text = errorMessage(err);
          const code = (err as { code?: number }).code;
          assert.equal(code, 422, `${name}: refused as Invalid (got ${code}: ${text})`);
          assert.match(text, message, `${name}: the refusal says why`);
          answer = text.slice(text.indexOf(":") + 1).trim();
          return;
        }
        assert.fail(`${name}: the API server accepted it`);
      },
      observe: () => Promise.resolve(answer),
    };
  };
}

/** A CocoonSet create the schema refuses. */
function refusedSet(name: string, spec: unknown, message: RegExp) {
  return refused(
    name,
    (stack) => stack.admin.create(CocoonSets, setBody(`bad-${name}`, spec)),
    message,
  );
}

/** A CocoonHibernation create the schema refuses. */
function refusedHibernation(name: string, spec: unknown, message: RegExp) {
  return refused(name, (stack) =>
    stack.admin.create(CocoonHibernations, {
      apiVersion: "cocoonset.cocoonstack.io/v1",
      kind: "CocoonHibernation",
      metadata: { name: `bad-${name}`, namespace: NS },
      spec: spec as never,
    }), message);
}

const AGENT = { image: IMAGE };

/** A set the operator must answer with a Warning Event and Ready=False of this reason. */
function flaggedSet(name: string, spec: Record<string, unknown>, reason: string, message: RegExp) {
  return (stack: Stack): Case => {
    let cs: CocoonSet | undefined;
    return {
      name,
      answer: "condition",
      async apply() {
        cs = await stack.admin.create(CocoonSets, setBody(name, { agent: AGENT, ...spec }));
      },
      async observe() {
        const now = await getSet(stack, cs!);
        const ready = conditionOf(now, "Ready");
        if (ready?.status !== "False" || ready.reason !== reason) return undefined;
        if (!message.test(ready.message ?? "")) return undefined;
        const warned = (await eventsWith(stack, now, reason)).some((e) => e.type === "Warning");
        return warned ? `Ready=False ${reason}: ${ready.message} (+ Warning Event)` : undefined;
      },
    };
  };
}

/** The Warning/Normal Event of reason about obj whose message matches, as the answer. */
async function eventAnswer(
  stack: Stack,
  obj: KubeObject,
  reason: string,
  message: RegExp,
): Promise<string | undefined> {
  const e = (await eventsWith(stack, obj, reason)).find((x) => message.test(x.message ?? ""));
  return e ? `${e.type} Event ${reason}: ${e.message}` : undefined;
}

/** A pod of a set whose generation stamp is overwritten with garbage: it is stamped again. */
function garbledStamp(name: string, pod: string, garbage: string) {
  return (stack: Stack): Case => ({
    name,
    answer: "repaired",
    async apply() {
      await stack.admin.patch(Pods, NS, pod, "merge", {
        metadata: { annotations: { [ANNOTATION_COCOON_SET_GENERATION]: garbage } },
      });
    },
    async observe() {
      const [p, cs] = await Promise.all([
        stack.admin.get(Pods, NS, pod),
        stack.admin.get(CocoonSets, NS, "gen"),
      ]);
      const stamp = p.metadata.annotations?.[ANNOTATION_COCOON_SET_GENERATION];
      if (stamp !== String(cs.metadata.generation)) return undefined;
      const ready = conditionOf(cs, "Ready");
      return ready?.status === "True"
        ? `stamp ${JSON.stringify(garbage)} rewritten to ${stamp}; set stays Ready`
        : undefined;
    },
  });
}

/** A CocoonHibernation body. */
function hibernationBody(name: string, pod: string, desire: "Hibernate" | "Wake") {
  return {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: pod }, desire },
  };
}

/** A request the operator answers with this phase and Ready reason, its message matching. */
function answeredHibernation(
  name: string,
  pod: string,
  phase: string,
  reason: string,
  message: RegExp,
) {
  return (stack: Stack): Case => ({
    name,
    answer: "condition",
    async apply() {
      await stack.admin.create(CocoonHibernations, hibernationBody(name, pod, "Hibernate"));
    },
    async observe() {
      const h = await stack.admin.get(CocoonHibernations, NS, name);
      const ready = findStatusCondition(h.status?.conditions, "Ready");
      return h.status?.phase === phase && ready?.reason === reason &&
          message.test(ready.message ?? "")
        ? `${phase}, Ready=${ready.status} ${reason}: ${ready.message}`
        : undefined;
    },
  });
}

/** The whole table; sets the cases depend on ("gen", "rh", "cr") exist before they apply. */
const CASES: ((stack: Stack) => Case)[] = [
  // --- refused by the schema: enums -------------------------------------------------------------
  refusedSet(
    "os",
    { agent: { ...AGENT, os: "beos" } },
    /spec\.agent\.os.*Unsupported value: "beos"/,
  ),
  refusedSet(
    "backend",
    { agent: { ...AGENT, backend: "qemu" } },
    /spec\.agent\.backend.*Unsupported/,
  ),
  refusedSet("mode", { agent: { ...AGENT, mode: "fork" } }, /spec\.agent\.mode.*Unsupported/),
  refusedSet("conn-type", { agent: { ...AGENT, connType: "telnet" } }, /connType.*Unsupported/),
  refusedSet(
    "snapshot-policy",
    { agent: AGENT, snapshotPolicy: "sometimes" },
    /snapshotPolicy.*Unsupported/,
  ),
  refusedSet(
    "hibernate-policy",
    { agent: AGENT, hibernatePolicy: "delete" },
    /hibernatePolicy.*Unsupported/,
  ),
  refusedSet(
    "toolbox-mode",
    { agent: AGENT, toolboxes: [{ name: "t", image: IMAGE, mode: "docker" }] },
    /toolboxes\[0\]\.mode.*Unsupported/,
  ),
  refusedHibernation("desire", { podRef: { name: "x" }, desire: "Sleep" }, /desire.*Unsupported/),
  // --- refused by the schema: types and bounds --------------------------------------------------
  refusedSet("replicas-string", { agent: { ...AGENT, replicas: "three" } }, /replicas.*integer/),
  refusedSet(
    "replicas-negative",
    { agent: { ...AGENT, replicas: -1 } },
    /replicas.*greater than or equal to 0/,
  ),
  refusedSet("replicas-fraction", { agent: { ...AGENT, replicas: 1.5 } }, /replicas.*integer/),
  refusedSet(
    "probe-port",
    { agent: { ...AGENT, probePort: 70000 } },
    /probePort.*less than or equal to 65535/,
  ),
  refusedSet("suspend-string", { agent: AGENT, suspend: "yes" }, /suspend.*boolean/),
  refusedSet("toolboxes-not-list", { agent: AGENT, toolboxes: "tools" }, /toolboxes.*array/),
  refusedSet(
    "vnc-port",
    { agent: AGENT, toolboxes: [{ name: "t", image: IMAGE, vncPort: -5 }] },
    /vncPort.*greater than or equal to 0/,
  ),
  refusedSet("storage-words", { agent: { ...AGENT, storage: "ten gigs" } }, /spec\.agent\.storage/),
  refusedSet(
    "cpu-words",
    { agent: { ...AGENT, resources: { limits: { cpu: "lots" } } } },
    /limits\.cpu/,
  ),
  // --- refused by the schema: names, required fields, lengths -----------------------------------
  refusedSet("image-empty", { agent: { image: "" } }, /spec\.agent\.image.*at least 1/),
  refusedSet("image-missing", { agent: {} }, /spec\.agent\.image: Required value/),
  refusedSet("agent-missing", {}, /spec\.agent: Required value/),
  refusedSet(
    "toolbox-name-pattern",
    { agent: AGENT, toolboxes: [{ name: "Bad_Name", image: IMAGE }] },
    /toolboxes\[0\]\.name.*should match/,
  ),
  refusedSet(
    "toolbox-name-missing",
    { agent: AGENT, toolboxes: [{ image: IMAGE }] },
    /name: Required value/,
  ),
  refusedSet(
    "class-too-long",
    { agent: AGENT, snapshotCompatibilityClass: "c".repeat(64) },
    /snapshotCompatibilityClass.*63/,
  ),
  refusedHibernation("podref-missing", { desire: "Hibernate" }, /spec\.podRef: Required value/),
  refusedHibernation(
    "podref-empty",
    { podRef: { name: "" }, desire: "Hibernate" },
    /podRef\.name.*at least 1/,
  ),
  // --- refused by the CEL rules -----------------------------------------------------------------
  refusedSet(
    "release-with-replicas",
    { agent: { ...AGENT, replicas: 2 }, hibernatePolicy: "release" },
    /hibernatePolicy=release requires agent\.replicas=0 and no toolboxes/,
  ),
  refused(
    "class-changed",
    (stack) =>
      stack.admin.patch(CocoonSets, NS, "cls", "merge", {
        spec: { snapshotCompatibilityClass: "gen2" },
      }),
    /snapshotCompatibilityClass is immutable once set/,
  ),
  refused(
    "podref-changed",
    (stack) =>
      stack.admin.patch(CocoonHibernations, NS, "cr-first", "merge", {
        spec: { podRef: { name: "healthy-0" } },
      }),
    /spec\.podRef is immutable/,
  ),
  // --- accepted by the API server, answered by the operator -------------------------------------
  flaggedSet(
    "dup-toolboxes",
    { toolboxes: [{ name: "t", image: IMAGE }, { name: "t", image: IMAGE }] },
    "InvalidSpec",
    /duplicate toolbox names "t"/,
  ),
  flaggedSet(
    "int-toolbox",
    { toolboxes: [{ name: "1", image: IMAGE }] },
    "InvalidSpec",
    /toolbox names "1" are integers/,
  ),
  flaggedSet(
    "neg-storage",
    { agent: { ...AGENT, storage: "-1Gi" } },
    "InvalidSpec",
    /main agent: /,
  ),
  flaggedSet(
    "requests-over-limits",
    { agent: { ...AGENT, resources: { limits: { cpu: "1" }, requests: { cpu: "2" } } } },
    "InvalidSpec",
    /must be less than or equal to cpu limit/,
  ),
  flaggedSet(
    "bad-resource-name",
    { agent: { ...AGENT, resources: { limits: { "gpu": "1" } } } },
    "InvalidSpec",
    /gpu/,
  ),
  flaggedSet(
    "bad-service-account",
    { agent: { ...AGENT, serviceAccountName: "Not A Name" } },
    "InvalidSpec",
    /serviceAccountName/,
  ),
  flaggedSet(
    LONG_NAME,
    {},
    "InvalidSpec",
    /must be no more than 63 (characters|bytes)/,
  ),
  (stack) => {
    const foreign = "clash";
    return {
      name: "foreign pod holds the main's name",
      answer: "condition",
      async apply() {
        await stack.admin.create(Pods, {
          metadata: { name: `${foreign}-0`, namespace: NS },
          spec: { containers: [{ name: "c", image: IMAGE }], nodeName: "nowhere" },
        });
        await stack.admin.create(CocoonSets, setBody(foreign, { agent: AGENT }));
      },
      async observe() {
        const cs = await stack.admin.get(CocoonSets, NS, foreign);
        const ready = conditionOf(cs, "Ready");
        if (ready?.reason !== "NameConflict" || ready.status !== "False") return undefined;
        return await eventAnswer(stack, cs, "NameConflict", /clash-0/);
      },
    };
  },
  (stack) => ({
    name: "garbage rebuild history",
    answer: "event",
    async apply() {
      await stack.admin.patch(CocoonSets, NS, "rh", "merge", {
        metadata: { annotations: { [REBUILD_HISTORY]: "{not json" } },
      });
      await stack.admin.patch(Pods, NS, "rh-1", "merge", {
        metadata: { annotations: { [ANNOTATION_SIM_FAIL]: "lifecycle" } },
      });
    },
    async observe() {
      const cs = await stack.admin.get(CocoonSets, NS, "rh");
      const raw = cs.metadata.annotations?.[REBUILD_HISTORY] ?? "";
      let count: unknown;
      try {
        count = (JSON.parse(raw) as Record<string, { count?: number }>)["1"]?.count;
      } catch {
        return undefined;
      }
      if (count !== 1) return undefined;
      const e = await eventAnswer(stack, cs, "SubAgentRebuilding", /slot 1 attempt 1\/4/);
      return e && `${e}; history rewritten as ${raw}`;
    },
  }),
  garbledStamp("generation stamp not a number", "gen-0", "abc"),
  garbledStamp("generation stamp overflows int64", "gen-1", "99999999999999999999"),
  garbledStamp("generation stamp negative", "gen-2", "-1"),
  (stack) => ({
    name: "podRef to a pod another request holds",
    answer: "event",
    async apply() {
      await stack.admin.create(CocoonHibernations, hibernationBody("cr-second", "cr-0", "Wake"));
    },
    async observe() {
      const h = await stack.admin.get(CocoonHibernations, NS, "cr-second");
      const ready = findStatusCondition(h.status?.conditions, "Ready");
      if (h.status?.phase !== "Failed" || ready?.reason !== "Conflict") return undefined;
      return await eventAnswer(stack, h, "Conflict", /cr-first/);
    },
  }),
  answeredHibernation(
    "hib-bad-podref",
    "a/b",
    "Failed",
    "Failed",
    /is not a valid pod name/,
  ),
  answeredHibernation("hib-no-pod", "no-such-pod", "Pending", "Pending", /not yet present/),
];

faultSuite("bad inputs", {
  nodes: [{ name: "vk-a", seats: 32 }, { name: "vk-b", seats: 32 }],
}, async (stack, scenario) => {
  const settled = (agents: number) => (cs: CocoonSet) =>
    inPhase("Running")(cs) && cs.status?.readyAgents === agents;
  let healthy: CocoonSet | undefined;

  await scenario(
    "≥ 30 bad inputs: each answered; the operator and a healthy set carry on",
    async (fig) => {
      healthy = await createSet(stack, NS, "healthy", {
        agent: { replicas: 1 },
        toolboxes: [{ name: "tools", image: IMAGE }],
      });
      // What some cases act on: a set for the stamps, one to rebuild, one for the requests, one
      // with a class to change.
      const gen = await createSet(stack, NS, "gen", { agent: { replicas: 2 } });
      const rh = await createSet(stack, NS, "rh", { agent: { replicas: 1 } });
      const cr = await createSet(stack, NS, "cr");
      await createSet(stack, NS, "cls", { snapshotCompatibilityClass: "gen1" });
      await Promise.all([
        waitSet(stack, healthy, "Running", settled(2)),
        waitSet(stack, gen, "Running", settled(3)),
        waitSet(stack, rh, "Running", settled(2)),
        waitSet(stack, cr, "Running", settled(1)),
      ]);
      await stack.admin.create(
        CocoonHibernations,
        hibernationBody("cr-first", "cr-0", "Hibernate"),
      );

      const cases = CASES.map((c) => c(stack));
      assert.ok(cases.length >= 30, `at least 30 cases (have ${cases.length})`);
      const started = Date.now();
      for (const c of cases) await c.apply();
      // The healthy set is changed while the operator deals with all of it.
      healthy = await patchSpec(stack, healthy, { agent: { replicas: 3 } });

      const answers = new Map<string, string>();
      await waitUntil(async () => {
        for (const c of cases) {
          if (answers.has(c.name)) continue;
          const seen = await c.observe().catch(() => undefined);
          if (seen !== undefined) answers.set(c.name, seen);
        }
        return answers.size === cases.length;
      }, {
        what: "every bad input answered",
        timeoutMs: 90_000,
        intervalMs: 250,
      }).catch((err) => {
        fig.answers = [...answers].map(([name, answer]) => `${name} → ${short(answer)}`);
        const missing = cases.filter((c) => !answers.has(c.name)).map((c) => c.name);
        throw new Error(`${(err as Error).message}; unanswered: ${missing.join(", ")}`);
      });
      fig.answeredMs = Date.now() - started;
      fig.cases = cases.length;
      const byKind: Record<string, number> = {};
      for (const c of cases) byKind[c.answer] = (byKind[c.answer] ?? 0) + 1;
      fig.byAnswer = byKind;
      fig.answers = cases.map((c) => `${c.name} → ${short(answers.get(c.name) ?? "")}`);

      await waitSet(stack, healthy, "Running with 4 agents next to the bad inputs", settled(4));
      fig.healthyConvergedMs = Date.now() - started;
      // A name no label can carry must not wedge the teardown either.
      await stack.admin.delete(CocoonSets, NS, LONG_NAME);
      await waitGone(LONG_NAME, () => stack.admin.get(CocoonSets, NS, LONG_NAME));
      const warnings = (await stack.events(healthy)).filter((e) => e.type === "Warning");
      assert.deepEqual(warnings.map((e) => e.reason), [], "the healthy set got no Warning");
      await stack.assertOperatorsHealthy();
    },
  );

  await scenario(
    "1 000 replicas: converges next to the healthy set, then tears down",
    async (fig) => {
      const started = Date.now();
      let big = await createSet(stack, NS, "big", { agent: { replicas: BIG } });
      const bigPods = async () =>
        (await stack.admin.list(Pods, {
          namespace: NS,
          labelSelector: { [LABEL_COCOON_SET]: "big" },
        }))
          .items.length;
      // The healthy set is changed while the big one is half-way: the operator is not starved.
      await waitUntil(async () => (await bigPods()) >= 100, {
        what: "the big set's first 100 pods",
        timeoutMs: 120_000,
        intervalMs: 200,
      });
      const changed = Date.now();
      healthy = await patchSpec(stack, healthy!, { agent: { replicas: 1 } });
      await waitSet(stack, healthy, "scaled down next to the big set", settled(2), 120_000);
      fig.healthyConvergedMs = Date.now() - changed;
      fig.bigPodsWhenHealthyConverged = await bigPods();
      big = await waitSet(stack, big, `Running with ${BIG + 1} agents`, settled(BIG + 1), 600_000);
      fig.bigRunningMs = Date.now() - started;
      assert.equal(big.status?.agents?.length, BIG + 1);
      const deleting = Date.now();
      await stack.admin.delete(CocoonSets, NS, "big");
      await waitGone("big", () => getSet(stack, big), 600_000);
      assert.equal(await bigPods(), 0, "no pod of the big set is left");
      fig.bigDeletedMs = Date.now() - deleting;
      await stack.assertOperatorsHealthy();
    },
  );
});
