/**
 * Go → port → Go on a live cluster, as a user of the Go original adopts this operator and rolls
 * back: the Go binary and this project's operator take turns (one process at a time, SIGTERM
 * then start, both electing their leader on the one Lease, so the hand-over gap is the real one),
 * each under the RBAC a user would have at that point:
 *
 *   a. the Go original under its own ClusterRole (go_original_rbac.yaml), which builds the
 *      population: running sets with sub-agents and toolboxes, a dead-lettered sub-agent, a
 *      retain suspend, a release suspend (seat given back), a Hibernated and a woken
 *      CocoonHibernation, and, held by the simulator for the next step, a Hibernate in flight,
 *      a migration and a released-seat wake;
 *   b. image swap: the port under the Go original's ClusterRole only;
 *   c. `kubectl apply -k config/default`: the port under whatever that adds;
 *   d. rollout undo: the Go original with the RBAC of (c) left in place.
 *
 * At each hand-over the new build must change no pod, spec or metadata and delete no registry
 * tag while it takes over; then it must finish the flows left in flight (and any earlier step
 * left unfinished), bring up a new set and a new request, and complete a deletion of a
 * Hibernated request and of a set (under the port the VM then comes back from its snapshot and
 * the tag goes once it runs); no API request may be answered 403. Each step prints one JSON line
 * (`"table":"go-round-trip"`) with its figures and fails on any figure that is wrong; status
 * writes, Events and requests by verb have no single right answer and are only printed. A failed
 * step does not stop the later ones, whose flows then include what it left behind.
 *
 * Needs the Go original's binary (GO_OPERATOR_BIN, default /tmp/gobase/operator); skipped with
 * one line saying how to build it when it is missing.
 */
import type { CocoonHibernation } from "../../common/apis/v1/mod.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import {
  ANNOTATION_HIBERNATE,
  ANNOTATION_HIBERNATED_ON_NODE,
  LABEL_COCOON_SET,
} from "../../common/meta/keys.ts";
import { isPodReady } from "../../common/meta/pod.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import { ANNOTATION_SIM_FAIL, ANNOTATION_SIM_PUSH_FAIL } from "../../sim/knobs.ts";
import type { SimNode } from "../../sim/nodes.ts";
import { createSet, inPhase, type SetSpec, vmOf, waitPod } from "../harness/stack_objects.ts";
import { recordTimeline, type Timeline } from "../harness/timeline.ts";
import { waitUntil } from "../harness/wait.ts";
import {
  apiFigures,
  type Build,
  diffObjects,
  eventsBetween,
  PROJECT_CONFIG_DEFAULT,
  type RoundTrip,
  roundTripUnavailable,
  snapshotEvents,
  snapshotObjects,
  snapshotTags,
  startRoundTrip,
  waitTakenOver,
} from "./_round_trip.ts";

const NS = "live";
const SPARE = "vk-s";
const NODES: SimNode[] = [
  { name: "vk-a", pool: "default", seats: 24 },
  { name: "vk-b", pool: "default", seats: 24 },
  // The released-seat wakes live here, so a full node can hold one without touching the rest.
  { name: SPARE, pool: "spare", seats: 8 },
];
const TOOLBOXES = [{ name: "tb", image: "ghcr.io/cocoonstack/cocoon/toolbox:1" }];
/** How long the population and one step's flows may take to converge. */
const CONVERGE_MS = 90_000;
/** How long a step waits for its flows before it reports the unfinished ones. */
const STEP_FLOWS_MS = 60_000;
/** Lease expiry (15 s) + start-up + a quiet stretch longer than one 5 s requeue. */
const TAKEOVER_MS = 45_000;
const QUIET_MS = 6_000;

interface StepPlan {
  id: "a" | "b" | "c" | "d";
  build: Build;
  change: string;
  rbac: string;
}

const STEPS: StepPlan[] = [
  { id: "a", build: "go", change: "go", rbac: "the Go original's ClusterRole" },
  { id: "b", build: "port", change: "go → port", rbac: "the Go original's ClusterRole" },
  {
    id: "c",
    build: "port",
    change: "port → port",
    rbac: "the Go original's ClusterRole + kubectl apply -k config/default",
  },
  {
    id: "d",
    build: "go",
    change: "port → go",
    rbac: "the Go original's ClusterRole + config/default left in place",
  },
];

// --- flows: work that must finish, possibly in a later step ------------------------------------

/**
 * What a flow may change on its way: the sets, requests and pods it acts on (pods it may create or
 * delete), the registry tags it may delete.
 */
interface Allowance {
  sets?: string[];
  requests?: string[];
  pods?: string[];
  tags?: string[];
}

interface Flow {
  name: string;
  allowance: Allowance;
  /** Where it stands, for the report of an unfinished flow. */
  state: string;
  outcome?: "done" | "failed";
  error?: string;
  promise: Promise<void>;
}

/** What a flow body uses: waits, gated actions and findings for the step it runs in. */
interface FlowContext {
  /** Polls until probe returns something (its last "not yet" text goes to the flow's state). */
  until<T>(
    what: string,
    probe: () => Promise<T | undefined | false>,
    timeoutMs?: number,
  ): Promise<T>;
  /** Runs a write of the test once no hand-over is under way. */
  act<T>(what: string, fn: () => Promise<T>): Promise<T>;
  /** A wrong figure found on the way; the flow goes on. */
  fail(message: string): void;
  /** The build running now. */
  build(): Build | undefined;
}

/**
 * The flows of the whole test. A hand-over pauses their writes (the test's own, not the
 * operators'), so the snapshots around it see only what the operators did.
 */
class Flows {
  readonly pending: Flow[] = [];
  #paused = false;
  #resume: (() => void)[] = [];
  #abort = new AbortController();
  /** Findings of the step now running. */
  findings: string[] = [];
  /** Every flow that was pending at some time during the step now running. */
  seen = new Set<Flow>();
  /** The flow that creates each set (and its request), for the flows that delete them. */
  readonly creators = new Map<string, Flow>();

  constructor(
    private readonly rt: RoundTrip,
    /** What the objects of an unfinished flow look like, for its report. */
    private readonly describe: (allowance: Allowance) => Promise<string>,
  ) {}

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    for (const r of this.#resume.splice(0)) r();
  }

  stop(): void {
    this.#abort.abort();
    this.resume();
  }

  add(name: string, allowance: Allowance, body: (ctx: FlowContext) => Promise<void>): Flow {
    const flow: Flow = {
      name,
      allowance,
      state: "started",
      promise: Promise.resolve(),
    };
    const signal = this.#abort.signal;
    const ctx: FlowContext = {
      until: async (what, probe, timeoutMs = 4 * 60_000) => {
        flow.state = `waiting for ${what}`;
        const over = Symbol("test over");
        const value = await waitUntil(
          async () => signal.aborted ? over : await probe(),
          { what, timeoutMs, intervalMs: 250 },
        );
        if (value === over) throw new Error("test over");
        return value as Exclude<typeof value, typeof over>;
      },
      act: async (what, fn) => {
        while (this.#paused) await new Promise<void>((r) => this.#resume.push(r));
        if (signal.aborted) throw new Error("test over");
        flow.state = what;
        return await fn();
      },
      fail: (message) => this.findings.push(`${name}: ${message}`),
      build: () => this.rt.current?.build,
    };
    flow.promise = body(ctx).then(
      () => void (flow.outcome = "done"),
      (err) => {
        flow.outcome = "failed";
        flow.error = (err as Error).message;
      },
    );
    this.pending.push(flow);
    this.seen.add(flow);
    return flow;
  }

  /** Starts a step: its findings and the flows it starts with. */
  beginStep(): void {
    this.findings = [];
    this.seen = new Set(this.pending);
  }

  /** What the flows (all seen in this step, or only the pending ones) may change. */
  allowed(
    which: "seen" | "pending",
  ): { objects: Set<string>; pods: Set<string>; tags: Set<string> } {
    const flows = which === "seen" ? [...this.seen] : this.pending;
    const all = (f: (a: Allowance) => string[] | undefined) =>
      flows.flatMap((flow) => f(flow.allowance) ?? []);
    return {
      objects: new Set([
        ...all((a) => a.sets).map((n) => `CocoonSet ${n}`),
        ...all((a) => a.requests).map((n) => `CocoonHibernation ${n}`),
        ...all((a) => a.pods).map((n) => `Pod ${n}`),
      ]),
      pods: new Set(all((a) => a.pods)),
      tags: new Set(all((a) => a.tags)),
    };
  }

  /**
   * Waits up to timeoutMs for every pending flow; reports the finished and the failed ones and
   * keeps the unfinished pending (a later step may finish them).
   */
  async settle(timeoutMs: number): Promise<{ finished: string[]; unfinished: string[] }> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)));
    await Promise.race([Promise.all(this.pending.map((f) => f.promise)), deadline]);
    clearTimeout(timer);
    const finished: string[] = [];
    const unfinished: string[] = [];
    for (const f of [...this.pending]) {
      if (f.outcome === undefined) {
        unfinished.push(f.name);
        const now = await this.describe(f.allowance).catch((err) => `(${err})`);
        this.findings.push(`${f.name}: not finished (${f.state})${now ? `; ${now}` : ""}`);
        continue;
      }
      this.pending.splice(this.pending.indexOf(f), 1);
      finished.push(f.name);
      if (f.outcome === "failed") this.findings.push(`${f.name}: ${f.error}`);
    }
    return { finished, unfinished };
  }
}

// --- reads ----------------------------------------------------------------------------------

async function tryGet<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function cocoonSet(rt: RoundTrip, name: string): Promise<CocoonSet | undefined> {
  return tryGet(() => rt.stack.admin.get(CocoonSets, NS, name));
}

function request(rt: RoundTrip, name: string): Promise<CocoonHibernation | undefined> {
  return tryGet(() => rt.stack.admin.get(CocoonHibernations, NS, name));
}

function pod(rt: RoundTrip, name: string): Promise<Pod | undefined> {
  return tryGet(() => rt.stack.admin.get(Pods, NS, name));
}

async function podsOfSet(rt: RoundTrip, set: string): Promise<Pod[]> {
  return (await rt.stack.admin.list(Pods, {
    namespace: NS,
    labelSelector: { [LABEL_COCOON_SET]: set },
  })).items;
}

/** A phase reached for the request's current generation. */
async function requestIn(rt: RoundTrip, name: string, phase: string): Promise<boolean> {
  const r = await request(rt, name);
  return r?.status?.phase === phase && r.status.observedGeneration === r.metadata.generation;
}

/** A phase reached for the set's current generation. */
async function setIn(rt: RoundTrip, name: string, phase: string): Promise<CocoonSet | undefined> {
  const cs = await cocoonSet(rt, name);
  return cs && inPhase(phase)(cs) ? cs : undefined;
}

/** The set is Running for its generation with every agent and toolbox Ready. */
async function converged(rt: RoundTrip, name: string): Promise<boolean> {
  const s = (await setIn(rt, name, "Running"))?.status;
  return !!s && s.readyAgents === s.desiredAgents &&
    (s.readyToolboxes ?? 0) === (s.desiredToolboxes ?? 0);
}

async function annotatePod(
  rt: RoundTrip,
  name: string,
  annotations: Record<string, string | null>,
): Promise<void> {
  await rt.stack.admin.patch(Pods, NS, name, "merge", { metadata: { annotations } });
}

async function patchSet(rt: RoundTrip, name: string, spec: Record<string, unknown>): Promise<void> {
  await rt.stack.admin.patch(CocoonSets, NS, name, "merge", { spec });
}

async function createRequest(rt: RoundTrip, name: string, podName: string): Promise<void> {
  await rt.stack.admin.create(CocoonHibernations, {
    apiVersion: "cocoonset.cocoonstack.io/v1",
    kind: "CocoonHibernation",
    metadata: { name, namespace: NS },
    spec: { podRef: { name: podName }, desire: "Hibernate" },
  });
}

/** The VM's `:hibernate` tag is in the registry. */
async function hasSnapshot(rt: RoundTrip, vm: string): Promise<boolean> {
  return (await rt.stack.tagsOf(vm)).includes("hibernate");
}

/** The simulator reported a refused push of vm. */
async function pushRefused(rt: RoundTrip, vm: string): Promise<boolean> {
  const { events } = await rt.stack.sim.events();
  return events.some((e) => e.type === "push-failed" && (e.detail ?? "").startsWith(`${vm}:`));
}

/** A line about each set, request and pod an allowance names, and its tags. */
async function describeObjects(rt: RoundTrip, a: Allowance): Promise<string> {
  const out: string[] = [];
  for (const name of a.sets ?? []) {
    const cs = await cocoonSet(rt, name);
    if (!cs) {
      out.push(`set ${name}: absent`);
      continue;
    }
    const ann = Object.keys(cs.metadata.annotations ?? {}).map((k) => k.split("/")[1]);
    out.push(
      `set ${name}: ${cs.status?.phase ?? "-"} (observed ${
        cs.status?.observedGeneration ?? "-"
      } of ${cs.metadata.generation}${
        cs.metadata.deletionTimestamp ? ", deleting" : ""
      }; annotations ${ann.join(",") || "-"})`,
    );
  }
  for (const name of a.requests ?? []) {
    const r = await request(rt, name);
    out.push(
      r
        ? `request ${name}: ${r.status?.phase ?? "-"} desire ${r.spec.desire}${
          r.metadata.deletionTimestamp ? ", deleting" : ""
        }`
        : `request ${name}: absent`,
    );
  }
  for (const name of a.pods ?? []) {
    const p = await pod(rt, name);
    if (!p) {
      out.push(`pod ${name}: absent`);
      continue;
    }
    const an = p.metadata.annotations ?? {};
    const scheduled = p.status?.conditions?.find((c) => c.type === "PodScheduled");
    out.push(
      `pod ${name}: node ${p.spec?.nodeName ?? "-"}, ready ${isPodReady(p)}, scheduled ${
        scheduled?.reason ?? scheduled?.status ?? "-"
      }, hibernate ${an[ANNOTATION_HIBERNATE] ?? "-"}, restore ${
        an["vm.cocoonstack.io/restore-from-hibernate"] ?? "-"
      }, lifecycle ${an["vm.cocoonstack.io/lifecycle-state"] ?? "-"}, vm id ${
        an["vm.cocoonstack.io/id"] ?? "-"
      }${p.metadata.deletionTimestamp ? ", deleting" : ""}`,
    );
  }
  for (const tag of a.tags ?? []) {
    const [vm] = tag.split(":");
    out.push(`${tag}: ${(await rt.stack.tagsOf(vm)).includes("hibernate") ? "present" : "absent"}`);
  }
  return out.join("; ");
}

// --- the flows --------------------------------------------------------------------------------

/** A Hibernate request, a migration and a released-seat wake, each held by the simulator. */
interface Held {
  /** The step that releases them. */
  step: string;
  hold: { set: string; request: string };
  migration: { set: string; to: string; oldUid: string };
  wake: { set: string; digest: string };
}

/**
 * Puts the next step's flows in flight under the build running now, each held by the simulator:
 * a Hibernate whose pushes are refused, a migration whose snapshot push is refused, and a
 * released-seat wake whose node pool has no free seat.
 */
async function holdFlows(rt: RoundTrip, flows: Flows, next: string): Promise<Held> {
  const { stack } = rt;
  const held: Held = {
    step: next,
    hold: { set: `hold-${next}`, request: `hold-${next}-h` },
    migration: { set: `mig-${next}`, to: "", oldUid: "" },
    wake: { set: `rw-${next}`, digest: "" },
  };
  const { hold, migration, wake } = held;
  const holding = flows.add(`hold a Hibernate (${hold.request})`, {
    requests: [hold.request],
  }, async (ctx) => {
    await ctx.act(
      "refuse its pushes",
      () => annotatePod(rt, `${hold.set}-0`, { [ANNOTATION_SIM_PUSH_FAIL]: "true" }),
    );
    await ctx.act("create the request", () => createRequest(rt, hold.request, `${hold.set}-0`));
    await ctx.until(
      `${hold.request} Hibernating with a refused push`,
      async () =>
        await requestIn(rt, hold.request, "Hibernating") &&
        await pushRefused(rt, vmOf(NS, hold.set, 0)),
      CONVERGE_MS,
    );
  });
  const migrating = flows.add(`hold a migration (${migration.set})`, {}, async (ctx) => {
    const main = `${migration.set}-0`;
    const before = await waitPod(stack, NS, main, "bound", (p) => !!p.spec?.nodeName);
    migration.oldUid = before.metadata.uid ?? "";
    migration.to = before.spec?.nodeName === "vk-a" ? "vk-b" : "vk-a";
    await ctx.act(
      "refuse its pushes",
      () => annotatePod(rt, main, { [ANNOTATION_SIM_PUSH_FAIL]: "true" }),
    );
    await ctx.act(
      `pin it to ${migration.to}`,
      () => patchSet(rt, migration.set, { nodeName: migration.to }),
    );
    await ctx.until(
      `${migration.set} Migrating with a refused push`,
      async () =>
        !!await setIn(rt, migration.set, "Migrating") &&
        await pushRefused(rt, vmOf(NS, migration.set, 0)),
      CONVERGE_MS,
    );
  });
  const waking = flows.add(`hold a released-seat wake (${wake.set})`, {
    pods: [`${wake.set}-0`],
  }, async (ctx) => {
    wake.digest = await stack.registry.digestOf(
      `${stack.prefix}/${vmOf(NS, wake.set, 0)}`,
      "hibernate",
    ) ?? "";
    if (!wake.digest) ctx.fail("no :hibernate snapshot to wake from");
    await ctx.act(
      "fill the spare node",
      async () => await stack.sim.setSeats(SPARE, await stack.sim.seatsUsed(SPARE)),
    );
    await ctx.act("resume it", () => patchSet(rt, wake.set, { suspend: false }));
    await ctx.until(`${wake.set} Waking, its main Unschedulable`, async () => {
      const p = await pod(rt, `${wake.set}-0`);
      const unschedulable = p?.status?.conditions?.some((c) =>
        c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"
      );
      return !!await setIn(rt, wake.set, "Waking") && !!unschedulable;
    }, CONVERGE_MS);
  });
  await Promise.all([holding.promise, migrating.promise, waking.promise]);
  return held;
}

/** Releases what holdFlows held; the build running now must finish each. */
function releaseHeld(rt: RoundTrip, flows: Flows, held: Held): void {
  const { stack } = rt;
  const { hold, migration, wake } = held;
  flows.add(`finish the held Hibernate (${hold.request})`, {
    requests: [hold.request],
    pods: [`${hold.set}-0`],
  }, async (ctx) => {
    await ctx.act(
      "accept its pushes",
      () => annotatePod(rt, `${hold.set}-0`, { [ANNOTATION_SIM_PUSH_FAIL]: null }),
    );
    await ctx.until(
      `${hold.request} Hibernated with its snapshot`,
      async () =>
        await requestIn(rt, hold.request, "Hibernated") &&
        await hasSnapshot(rt, vmOf(NS, hold.set, 0)),
    );
  });
  const migVm = vmOf(NS, migration.set, 0);
  flows.add(`finish the migration (${migration.set})`, {
    sets: [migration.set],
    pods: [`${migration.set}-0`],
    tags: [`${migVm}:hibernate`],
  }, async (ctx) => {
    await ctx.act(
      "accept its pushes",
      () => annotatePod(rt, `${migration.set}-0`, { [ANNOTATION_SIM_PUSH_FAIL]: null }),
    );
    await ctx.until(`${migration.set} Running on ${migration.to}, snapshot dropped`, async () => {
      const main = await pod(rt, `${migration.set}-0`);
      return await converged(rt, migration.set) && !!main &&
        main.metadata.uid !== migration.oldUid && main.spec?.nodeName === migration.to &&
        isPodReady(main) && !await hasSnapshot(rt, migVm);
    });
  });
  const wakeVm = vmOf(NS, wake.set, 0);
  flows.add(`finish the released-seat wake (${wake.set})`, {
    sets: [wake.set],
    pods: [`${wake.set}-0`],
    tags: [`${wakeVm}:hibernate`],
  }, async (ctx) => {
    await ctx.act("free a seat", () => stack.sim.setSeats(SPARE, 8));
    await ctx.until(`${wake.set} Running, hint cleared, snapshot dropped`, async () => {
      const cs = await cocoonSet(rt, wake.set);
      return await converged(rt, wake.set) &&
        !cs?.metadata.annotations?.[ANNOTATION_HIBERNATED_ON_NODE] &&
        !await hasSnapshot(rt, wakeVm);
    });
    const vm = await stack.sim.vm(NS, `${wake.set}-0`);
    if (vm?.restoredFrom !== wake.digest) {
      ctx.fail(`restored from ${vm?.restoredFrom || "nothing"}, not its snapshot ${wake.digest}`);
    }
  });
}

/** A new set and a new Hibernate request on its sub-agent, both converging. */
function newObjects(rt: RoundTrip, flows: Flows, step: string): void {
  const set = `new-${step}`;
  const flow = flows.add(`new set and request (${set})`, {
    sets: [set],
    requests: [`${set}-h`],
    pods: [`${set}-0`, `${set}-1`],
  }, async (ctx) => {
    await ctx.act("create the set", () => createSet(rt.stack, NS, set, { agent: { replicas: 1 } }));
    await ctx.until(`${set} Running`, () => converged(rt, set));
    await ctx.act("create the request", () => createRequest(rt, `${set}-h`, `${set}-1`));
    await ctx.until(`${set}-h Hibernated`, () => requestIn(rt, `${set}-h`, "Hibernated"));
  });
  flows.creators.set(set, flow);
}

/**
 * Deletes a Hibernated request (once the flow that made it is done), then the set whose
 * sub-agent it hibernated. Under the port the VM comes back from its snapshot and the tag goes
 * once it runs; the Go original drops the tag at once and leaves the pod hibernated (its
 * documented behaviour), so only the deletion itself is checked there.
 */
function deletion(rt: RoundTrip, flows: Flows, set: string, requestName: string): void {
  const target = `${set}-1`;
  const vm = vmOf(NS, set, 1);
  flows.add(`delete ${requestName}, then ${set}`, {
    sets: [set],
    requests: [requestName],
    pods: [`${set}-0`, target],
    tags: [`${vmOf(NS, set, 0)}:hibernate`, `${vm}:hibernate`],
  }, async (ctx) => {
    await flows.creators.get(set)?.promise;
    await ctx.until(`${requestName} Hibernated`, () => requestIn(rt, requestName, "Hibernated"));
    const digest = await rt.stack.registry.digestOf(`${rt.stack.prefix}/${vm}`, "hibernate");
    await ctx.act(
      `delete ${requestName}`,
      () => rt.stack.admin.delete(CocoonHibernations, NS, requestName),
    );
    await ctx.until(`${requestName} gone`, async () => !(await request(rt, requestName)));
    if (ctx.build() === "port") {
      const back = await ctx.until(`${target}'s VM running again`, async () => {
        const p = await pod(rt, target);
        const v = await rt.stack.sim.vm(NS, target);
        return !!p && !p.metadata.annotations?.[ANNOTATION_HIBERNATE] && isPodReady(p) &&
          v?.phase === "running";
      }, STEP_FLOWS_MS).catch(() => false);
      if (!back) {
        ctx.fail(
          `${target}'s VM still hibernated ${STEP_FLOWS_MS / 1000} s after ${requestName} went`,
        );
      } else {
        const v = await rt.stack.sim.vm(NS, target);
        if (v?.restoredFrom !== digest) {
          ctx.fail(`${target} came back from ${v?.restoredFrom || "a fresh boot"}, not ${digest}`);
        }
        // Only a return under the port is held to that; the Go original keeps such a tag.
        if (ctx.build() === "port") {
          await ctx.until(
            `${vm}:hibernate dropped after the VM's return`,
            async () => !await hasSnapshot(rt, vm),
            20_000,
          ).catch(() => ctx.fail(`${vm}:hibernate outlives the VM's return (20 s after it ran)`));
        }
      }
    }
    await ctx.act(`delete ${set}`, () => rt.stack.admin.delete(CocoonSets, NS, set));
    await ctx.until(
      `${set} and its pods gone`,
      async () => !await cocoonSet(rt, set) && (await podsOfSet(rt, set)).length === 0,
    );
  });
}

// --- the population -----------------------------------------------------------------------------

/** Builds the live cluster under the running build (see the module doc). */
function population(rt: RoundTrip, flows: Flows): void {
  const { stack } = rt;
  const sets: [string, SetSpec][] = [
    ["run", { agent: { replicas: 2 }, toolboxes: TOOLBOXES }],
    ["dl", { agent: { replicas: 1 } }],
    ["keep", { agent: { replicas: 1 }, toolboxes: TOOLBOXES }],
    ["rel", { hibernatePolicy: "release" }],
    ["hib", { agent: { replicas: 2 } }],
    ...["a", "b", "c", "d"].map((
      k,
    ): [string, SetSpec] => [`drop-${k}`, { agent: { replicas: 1 } }]),
    ...["b", "c", "d"].flatMap((k): [string, SetSpec][] => [
      [`hold-${k}`, {}],
      [`mig-${k}`, {}],
      [`rw-${k}`, { hibernatePolicy: "release", nodePool: "spare" }],
    ]),
  ];
  const suspend = (name: string, released: boolean) => async (ctx: FlowContext) => {
    await ctx.act("suspend", () => patchSet(rt, name, { suspend: true }));
    await ctx.until(`${name} Suspended`, async () => {
      const cs = await setIn(rt, name, "Suspended");
      return !!cs && (!released ||
        ((cs.status?.agents ?? []).length === 0 && (await podsOfSet(rt, name)).length === 0));
    }, CONVERGE_MS);
  };
  const hibernated = (requestName: string, podName: string) => async (ctx: FlowContext) => {
    await ctx.act(`create ${requestName}`, () => createRequest(rt, requestName, podName));
    await ctx.until(
      `${requestName} Hibernated`,
      () => requestIn(rt, requestName, "Hibernated"),
      CONVERGE_MS,
    );
  };
  const deadLetter = async (ctx: FlowContext) => {
    // Four rebuilds already spent: the next failure dead-letters the pod.
    await ctx.act("spend its rebuilds", () =>
      stack.admin.patch(CocoonSets, NS, "dl", "merge", {
        metadata: {
          annotations: {
            "cocoonset.cocoonstack.io/rebuild-history":
              '{"1":{"count":4,"lastDeleted":"2020-01-01T00:00:00Z"}}',
          },
        },
      }));
    await ctx.act(
      "fail dl-1",
      () => annotatePod(rt, "dl-1", { [ANNOTATION_SIM_FAIL]: "lifecycle" }),
    );
    await ctx.until(
      "dl-1 dead-lettered",
      async () =>
        (await pod(rt, "dl-1"))?.metadata.annotations?.["cocoonset.cocoonstack.io/dead-letter"] ===
          "true",
      CONVERGE_MS,
    );
  };
  const parkAndWake = async (ctx: FlowContext) => {
    await Promise.all([
      hibernated("hib-park", "hib-1")(ctx),
      (async () => {
        await hibernated("hib-woken", "hib-2")(ctx);
        await ctx.act(
          "wake hib-woken",
          () =>
            stack.admin.patch(CocoonHibernations, NS, "hib-woken", "merge", {
              spec: { desire: "Wake" },
            }),
        );
        await ctx.until(
          "hib-woken Active",
          () => requestIn(rt, "hib-woken", "Active"),
          CONVERGE_MS,
        );
      })(),
    ]);
  };
  const then = (name: string): ((ctx: FlowContext) => Promise<void>) | undefined =>
    name === "dl"
      ? deadLetter
      : name === "keep"
      ? suspend(name, false)
      : name === "rel" || name.startsWith("rw-")
      ? suspend(name, true)
      : name === "hib"
      ? parkAndWake
      : name.startsWith("drop-")
      ? hibernated(`${name}-h`, `${name}-1`)
      : undefined;
  for (const [name, spec] of sets) {
    const members = [
      ...Array.from({ length: 1 + (spec.agent?.replicas ?? 0) }, (_, i) => String(i)),
      ...(spec.toolboxes ?? []).map((tb) => tb.name),
    ];
    const flow = flows.add(`population: ${name}`, {
      sets: [name],
      pods: members.map((m) => `${name}-${m}`),
    }, async (ctx) => {
      await ctx.act("create", () => createSet(stack, NS, name, spec));
      await ctx.until(`${name} Running`, () => converged(rt, name), CONVERGE_MS);
      await then(name)?.(ctx);
    });
    flows.creators.set(name, flow);
  }
}

// --- one step -------------------------------------------------------------------------------------

/** The figures of one step; printed as one JSON line. */
interface StepTable {
  table: "go-round-trip";
  step: string;
  change: string;
  rbac: string;
  /** From the old build's SIGTERM until the new one took over and had been quiet for 6 s. */
  handover?: {
    /** From the old build's exit until the new one held the Lease (null: it never did). */
    gapSeconds: number | null;
    podsCreated: number;
    podsDeleted: number;
    tagsDeleted: number;
    specMetadataChanges: string[];
    /** Changes to objects whose flows an earlier step left unfinished (not counted above). */
    inFlightCompletions: string[];
  };
  /** The whole step, hand-over included. */
  seconds: number;
  podsCreated: number;
  podsDeleted: number;
  unexpectedPods: string[];
  tagsDeleted: number;
  unexpectedTagsDeleted: string[];
  statusWrites: Record<string, number>;
  objectWrites: Record<string, number>;
  eventsByReason: Record<string, number>;
  requestsByVerb: Record<string, number>;
  forbidden: Record<string, number>;
  flowsFinished: string[];
  flowsUnfinished: string[];
  failures: string[];
}

/** Pod names created and deleted between two Date.now() moments. */
function podChanges(pods: Timeline<Pod>, from: number, to: number) {
  const inWindow = pods.sightings.filter((s) => s.at >= from && s.at < to);
  const names = (type: string) =>
    inWindow.filter((s) => s.type === type).map((s) => s.object.metadata.name ?? "");
  return { created: names("ADDED"), deleted: names("DELETED") };
}

/** What a step does besides the hand-over. */
interface StepWork {
  /** Runs between the old build's exit and the new one's start (e.g. applying manifests). */
  before?: () => Promise<void>;
  /** What the previous step held in flight, released once the new build took over. */
  held?: Held;
  /** Build the population (step a). */
  populate?: boolean;
  /** [set, Hibernated request on its sub-agent] to delete. */
  deletions: [string, string][];
  /** Hold flows in flight for this step. */
  holdNext?: string;
}

/**
 * Runs one step: the hand-over to plan.build (unless it runs already), the release of what the
 * previous step held, new objects, deletions, and the flows held for the next step. Returns the
 * step's table (failures listed in it) and what it held.
 */
async function runStep(
  rt: RoundTrip,
  flows: Flows,
  pods: Timeline<Pod>,
  plan: StepPlan,
  work: StepWork,
): Promise<{ table: StepTable; held?: Held; failures: string[] }> {
  flows.beginStep();
  const t0 = performance.now();
  const d0 = Date.now();
  const tags0 = await snapshotTags(rt.stack);
  const events0 = await snapshotEvents(rt.stack);
  let handover: StepTable["handover"];
  let working = true;
  /** The API figures count from the new build's start (the old one's last requests aside). */
  let apiFrom = t0;

  if (rt.current?.build !== plan.build || work.before) {
    flows.pause();
    const objects0 = await snapshotObjects(rt.stack, NS);
    const previousHolder = (await rt.lease())?.spec?.holderIdentity ?? "";
    const stoppedAt = Date.now();
    await rt.stopCurrent();
    const exitedAt = performance.now();
    apiFrom = exitedAt;
    await work.before?.();
    const running = await rt.start(plan.build, `cocoon-${plan.build}-${plan.id}`);
    let gapSeconds: number | null = null;
    try {
      const tookAt = await waitTakenOver(rt, running, {
        previousHolder,
        quietMs: QUIET_MS,
        timeoutMs: TAKEOVER_MS,
      });
      gapSeconds = +((tookAt - exitedAt) / 1000).toFixed(1);
    } catch (err) {
      working = false;
      flows.findings.push(`hand-over: ${(err as Error).message}`);
    }
    const objects1 = await snapshotObjects(rt.stack, NS);
    const tags1 = await snapshotTags(rt.stack);
    const { created, deleted } = podChanges(pods, stoppedAt, Date.now());
    // Flows an earlier step left unfinished may complete now; their changes are theirs.
    const inFlight = flows.allowed("pending");
    const changes = diffObjects(objects0, objects1);
    const theirs = (c: string) => inFlight.objects.has(c.slice(0, c.indexOf(":")));
    const tagsGone = [...tags0].filter((t) => !tags1.has(t) && !inFlight.tags.has(t));
    const podsCreated = created.filter((p) => !inFlight.pods.has(p));
    const podsDeleted = deleted.filter((p) => !inFlight.pods.has(p));
    handover = {
      gapSeconds,
      podsCreated: podsCreated.length,
      podsDeleted: podsDeleted.length,
      tagsDeleted: tagsGone.length,
      specMetadataChanges: changes.filter((c) => !theirs(c)),
      inFlightCompletions: changes.filter(theirs),
    };
    for (const c of handover.specMetadataChanges) flows.findings.push(`hand-over changed ${c}`);
    for (const t of tagsGone) flows.findings.push(`hand-over deleted the tag ${t}`);
    for (const p of podsCreated) flows.findings.push(`hand-over created the pod ${p}`);
    for (const p of podsDeleted) flows.findings.push(`hand-over deleted the pod ${p}`);
    flows.resume();
  }

  if (work.populate) population(rt, flows);
  if (work.held) releaseHeld(rt, flows, work.held);
  newObjects(rt, flows, plan.id);
  for (const [set, req] of work.deletions) deletion(rt, flows, set, req);
  const { finished, unfinished } = await flows.settle(
    work.populate ? CONVERGE_MS + STEP_FLOWS_MS : STEP_FLOWS_MS,
  );
  let held: Held | undefined;
  if (work.holdNext) {
    // Holding needs a build that took over; otherwise what is unfinished is the next step's
    // work in flight.
    if (working) {
      try {
        held = await holdFlows(rt, flows, work.holdNext);
      } catch (err) {
        flows.findings.push(`holding the next step's flows: ${(err as Error).message}`);
      }
      const more = await flows.settle(STEP_FLOWS_MS);
      finished.push(...more.finished);
      unfinished.push(...more.unfinished);
    } else {
      flows.findings.push(`nothing held for step ${work.holdNext}: it inherits what is unfinished`);
    }
  }

  const t1 = performance.now();
  const tags1 = await snapshotTags(rt.stack);
  const events1 = await snapshotEvents(rt.stack);
  const { created, deleted } = podChanges(pods, d0, Date.now());
  const allowed = flows.allowed("seen");
  const tagsGone = [...tags0].filter((t) => !tags1.has(t));
  const unexpectedPods = [
    ...created.filter((p) => !allowed.pods.has(p)).map((p) => `created ${p}`),
    ...deleted.filter((p) => !allowed.pods.has(p)).map((p) => `deleted ${p}`),
  ];
  const unexpectedTagsDeleted = tagsGone.filter((t) => !allowed.tags.has(t));
  const api = apiFigures(rt.api, apiFrom, t1);
  const failures = [
    ...flows.findings,
    ...unexpectedPods.map((p) => `unexpected pod change: ${p}`),
    ...unexpectedTagsDeleted.map((t) => `unexpected tag deletion: ${t}`),
    ...Object.entries(api.forbidden).map(([what, n]) => `403 ×${n}: ${what}`),
  ];
  if (rt.current?.exited()) {
    failures.push(`${plan.build} exited:\n${rt.current.op.proc.output.slice(-3000)}`);
  }
  const table: StepTable = {
    table: "go-round-trip",
    step: plan.id,
    change: plan.change,
    rbac: plan.rbac,
    handover,
    seconds: +((t1 - t0) / 1000).toFixed(1),
    podsCreated: created.length,
    podsDeleted: deleted.length,
    unexpectedPods,
    tagsDeleted: tagsGone.length,
    unexpectedTagsDeleted,
    statusWrites: api.statusWrites,
    objectWrites: api.objectWrites,
    eventsByReason: eventsBetween(events0, events1),
    requestsByVerb: api.requestsByVerb,
    forbidden: api.forbidden,
    flowsFinished: finished,
    flowsUnfinished: unfinished,
    // One line each here; the error the step throws quotes them whole.
    failures: failures.map((f) => f.split("\n")[0].slice(0, 400)),
  };
  return { table, held, failures };
}

// --- the test ---------------------------------------------------------------------------------

const unavailable = roundTripUnavailable();
if (unavailable) console.error(`go round trip skipped: ${unavailable}`);

Deno.test({
  name: "e2e: Go original → port → Go original on a live cluster, each with a user's RBAC",
  ignore: unavailable !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    await using rt = await startRoundTrip(NODES);
    await rt.stack.namespace(NS);
    const pods = await recordTimeline(rt.stack.admin, Pods, NS);
    const flows = new Flows(rt, (allowance) => describeObjects(rt, allowance));
    try {
      let held: Held | undefined;
      /** A step that could not run to its end (not one with wrong figures) ends the test. */
      let broken = "";
      const run = async (plan: StepPlan, work: StepWork) => {
        await t.step(`${plan.id}. ${plan.change} under ${plan.rbac}`, async () => {
          if (broken) throw new Error(`not run: ${broken}`);
          const out = await runStep(rt, flows, pods, plan, work).catch((err) => {
            broken = `step ${plan.id} broke off: ${(err as Error).message}`;
            throw err;
          });
          console.log(JSON.stringify(out.table));
          held = out.held;
          if (out.failures.length > 0) {
            throw new Error(`step ${plan.id}:\n- ${out.failures.join("\n- ")}`);
          }
        });
      };
      const [a, b, c, d] = STEPS;
      await rt.start("go", "cocoon-go-a");
      await run(a, { populate: true, deletions: [["drop-a", "drop-a-h"]], holdNext: "b" });
      await run(b, {
        held,
        deletions: [["drop-b", "drop-b-h"], ["new-a", "new-a-h"]],
        holdNext: "c",
      });
      await run(c, {
        before: async () => void await rt.kubectl(["apply", "-k", PROJECT_CONFIG_DEFAULT]),
        held,
        deletions: [["drop-c", "drop-c-h"], ["new-b", "new-b-h"]],
        holdNext: "d",
      });
      await run(d, { held, deletions: [["drop-d", "drop-d-h"], ["new-c", "new-c-h"]] });
    } finally {
      flows.stop();
      await pods.stop();
    }
  },
});
