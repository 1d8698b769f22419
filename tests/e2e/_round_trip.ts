/**
 * The system the Go ↔ port round trip runs on (go_round_trip_test.ts): tests/harness/stack.ts
 * with no operator of its own and no RBAC of this project, the counting API proxy of the
 * benchmarks (HTTPS, so the Go client sends its token), and one operator at a time, either the
 * Go original's binary or this project's `deno task start`, each through
 * tests/bench/operator_under_test.ts under the cocoon-operator ServiceAccount, leader election
 * on. Also what the steps compare: snapshots of the objects, the registry's tags and the Events,
 * and the figures of one step's table. Private to tests/e2e/.
 *
 * The Go build finds its leader-election namespace only in the pod's service-account folder
 * (controller-runtime reads /var/run/secrets/kubernetes.io/serviceaccount/namespace and has no
 * flag or variable for it), so it runs in a mount namespace of its own with a tmpfs on /run that
 * holds that one file; nothing outside the process sees it. It also deletes registry tags only by
 * tag, which docker-registry 2.8 refuses (it deletes by digest), so the operators' registry proxy
 * accepts tag deletes as Artifact Registry does (RegistryProxy.tagDeletes); without that the Go
 * build could never finish a wake or a migration here.
 *
 * @module
 */
import type { CocoonHibernation } from "../../common/apis/v1/mod.ts";
import type { CocoonSet } from "../../common/apis/v1/cocoonset_types.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import { type CoreEvent, Events, type Lease, Leases, type Pod, Pods } from "../../kube/core.ts";
import { isNotFound } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/object.ts";
import { type ApiProxy, startApiProxy } from "../bench/api_proxy.ts";
import { type OperatorUnderTest, startOperatorUnderTest } from "../bench/operator_under_test.ts";
import { proxyServing } from "../bench/system.ts";
import type { SimNode } from "../../sim/nodes.ts";
import { registryAvailable } from "../harness/registry.ts";
import { OPERATOR_NAMESPACE, type Stack, startStack } from "../harness/stack.ts";
import { waitUntil } from "../harness/wait.ts";
import { GO_ORIGINAL_RBAC_PATH } from "../fixtures/go_original_rbac.ts";

const repoRoot = new URL("../../", import.meta.url).pathname;

/** What `kubectl apply -k config/default` applies. */
export const PROJECT_CONFIG_DEFAULT = `${repoRoot}config/default`;

/** The Lease both builds elect their leader on. */
export const LEASE_NAME = "cocoon-operator.cocoonset.cocoonstack.io";

/** The Go original's binary: GO_OPERATOR_BIN, else where the shared build script puts it. */
export const GO_OPERATOR_BIN = Deno.env.get("GO_OPERATOR_BIN") || "/tmp/gobase/operator";

/** Why the round trip cannot run here, or undefined when it can. */
export function roundTripUnavailable(): string | undefined {
  if (!registryAvailable()) return "docker-registry is not installed";
  try {
    if (!Deno.statSync(GO_OPERATOR_BIN).isFile) throw new Error("not a file");
  } catch {
    return `no Go cocoon-operator binary at ${GO_OPERATOR_BIN}: build cocoonstack/cocoon-operator ` +
      `6151b05 there with ../shared/tools/build-go-original.sh (MIRRORS=<folder holding the ` +
      `cocoon-operator and cocoon-common mirrors>), or set GO_OPERATOR_BIN to such a build`;
  }
  return undefined;
}

/** Which operator runs. */
export type Build = "go" | "port";

/** A single-quoted shell word. */
function shellWord(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The Go binary in a mount namespace whose /run holds the service-account namespace file (see
 * the module doc). As root a plain mount namespace; otherwise one inside a user namespace.
 */
function goCommand(): string {
  const dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  const inside = [
    'mount -t tmpfs tmpfs "$(readlink -f /var/run)"',
    `mkdir -p ${dir}`,
    // As a pod's file: no trailing newline (controller-runtime uses the bytes as they are).
    `printf %s ${OPERATOR_NAMESPACE} > ${dir}/namespace`,
    'exec "$0"',
  ].join(" && ");
  const flags = Deno.uid() === 0 ? "-m" : "-r -m";
  return `exec unshare ${flags} --propagation private sh -c ${shellWord(inside)} ${
    shellWord(GO_OPERATOR_BIN)
  }`;
}

/** One operator process of the round trip. */
export interface RunningBuild {
  readonly build: Build;
  /** Its POD_NAME; the port's Lease identity starts with it, the Go build's with the host name. */
  readonly label: string;
  readonly op: OperatorUnderTest;
  /** performance.now() when it was spawned. */
  readonly spawnedAt: number;
  /** Whether the process has exited. */
  exited(): boolean;
}

/** The system; see the module doc. */
export interface RoundTrip extends AsyncDisposable {
  readonly stack: Stack;
  /** Every API request of every operator process (only one runs at a time). */
  readonly api: ApiProxy;
  readonly current: RunningBuild | undefined;
  /** Starts a build (none may be running). */
  start(build: Build, label: string): Promise<RunningBuild>;
  /** SIGTERM to the running build; resolves once it exited (SIGKILL after 20 s). */
  stopCurrent(): Promise<void>;
  /** The Lease as stored (undefined before the first leader). */
  lease(): Promise<Lease | undefined>;
  /** Whether the Lease names this process as holder. */
  holds(run: RunningBuild, lease: Lease | undefined): boolean;
  /** kubectl with the admin kubeconfig; throws with kubectl's stderr on failure. */
  kubectl(args: string[]): Promise<string>;
  stop(): Promise<void>;
}

/** Starts control plane, registry, simulator and API proxy, and installs the Go build's RBAC. */
export async function startRoundTrip(nodes: SimNode[]): Promise<RoundTrip> {
  const stack = await startStack({ operators: 0, projectRbac: false, nodes });
  // The Go original deletes tags only by tag; docker-registry 2.8 deletes only by digest.
  stack.proxy.tagDeletes = true;
  let api: ApiProxy | undefined;
  let current: RunningBuild | undefined;
  const stopCurrent = async () => {
    const run = current;
    current = undefined;
    await run?.op.stop();
  };
  const stop = async () => {
    await stopCurrent().catch(() => {});
    await api?.close().catch(() => {});
    await stack.stop();
  };
  try {
    const kubectl = async (args: string[]) => {
      const res = await stack.cp.kubectl(args);
      if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };
    await kubectl(["apply", "-f", GO_ORIGINAL_RBAC_PATH]);
    const token = await stack.cp.serviceAccountKubeconfig(OPERATOR_NAMESPACE, "cocoon-operator");
    api = startApiProxy(stack.cp.server, stack.cp.caCertPem, undefined, await proxyServing());
    const kubeconfig = await api.rewriteKubeconfig(token);
    const proxy = api;
    const hostname = Deno.hostname();
    return {
      stack,
      api: proxy,
      get current() {
        return current;
      },
      async start(build, label) {
        if (current) throw new Error(`start ${build}: ${current.build} still runs`);
        const spawnedAt = performance.now();
        const op = await startOperatorUnderTest({
          command: build === "go" ? goCommand() : "deno task start",
          kubeconfig,
          ociRegistry: `${stack.proxy.host}/${stack.prefix}`,
          env: {
            LEADER_ELECT: "true",
            POD_NAME: label,
            // The GC trace the benchmarks read would bury the log lines a failure quotes.
            DENO_V8_FLAGS: "--no-trace-gc",
          },
        });
        let exited = false;
        op.proc.status.finally(() => exited = true).catch(() => {});
        current = { build, label, op, spawnedAt, exited: () => exited };
        return current;
      },
      stopCurrent,
      async lease() {
        try {
          return await stack.admin.get(Leases, OPERATOR_NAMESPACE, LEASE_NAME);
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
      },
      holds(run, lease) {
        const holder = lease?.spec?.holderIdentity ?? "";
        return holder.startsWith(`${run.build === "go" ? hostname : run.label}_`);
      },
      kubectl,
      stop,
      [Symbol.asyncDispose]: stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// --- what a step compares ----------------------------------------------------------------------

/** The parts of an object a build may not change on taking over: everything but status. */
interface ObjectShape {
  uid: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  finalizers: string[];
  ownerReferences: unknown[];
  deletionTimestamp: string;
  spec: unknown;
}

function shapeOf(obj: KubeObject & { spec?: unknown }): ObjectShape {
  const m = obj.metadata;
  return {
    uid: m.uid ?? "",
    labels: m.labels ?? {},
    annotations: m.annotations ?? {},
    finalizers: m.finalizers ?? [],
    ownerReferences: m.ownerReferences ?? [],
    deletionTimestamp: m.deletionTimestamp ?? "",
    spec: obj.spec ?? null,
  };
}

/** Objects of one namespace by `<kind> <name>`. */
export type ObjectSnapshot = Map<string, ObjectShape>;

/** The CocoonSets, CocoonHibernations and pods of namespace, as their shape. */
export async function snapshotObjects(stack: Stack, namespace: string): Promise<ObjectSnapshot> {
  const [sets, requests, pods] = await Promise.all([
    stack.admin.list(CocoonSets, { namespace }),
    stack.admin.list(CocoonHibernations, { namespace }),
    stack.admin.list(Pods, { namespace }),
  ]);
  const out: ObjectSnapshot = new Map();
  const add = (kind: string, items: (KubeObject & { spec?: unknown })[]) => {
    for (const o of items) out.set(`${kind} ${o.metadata.name}`, shapeOf(o));
  };
  add("CocoonSet", sets.items as CocoonSet[]);
  add("CocoonHibernation", requests.items as CocoonHibernation[]);
  add("Pod", pods.items as Pod[]);
  return out;
}

function stable(v: unknown): string {
  return JSON.stringify(
    v,
    (_k, x) =>
      x && typeof x === "object" && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
        : x,
  );
}

/**
 * Every difference between two snapshots, one line each: an object that appeared, went or was
 * replaced (new uid), a label / annotation key added, removed or changed, finalizers, owner
 * references, a deletion requested, a spec changed.
 */
export function diffObjects(before: ObjectSnapshot, after: ObjectSnapshot): string[] {
  const out: string[] = [];
  for (const [key, was] of before) {
    const now = after.get(key);
    if (!now) {
      out.push(`${key}: gone`);
      continue;
    }
    if (now.uid !== was.uid) {
      out.push(`${key}: replaced (uid ${was.uid} → ${now.uid})`);
      continue;
    }
    for (const field of ["labels", "annotations"] as const) {
      const keys = new Set([...Object.keys(was[field]), ...Object.keys(now[field])]);
      for (const k of [...keys].sort()) {
        const a = was[field][k];
        const b = now[field][k];
        if (a === b) continue;
        out.push(
          `${key}: ${field} ${k} ${
            a === undefined
              ? `added ${JSON.stringify(b)}`
              : b === undefined
              ? `removed (was ${JSON.stringify(a)})`
              : `${JSON.stringify(a)} → ${JSON.stringify(b)}`
          }`,
        );
      }
    }
    for (const field of ["finalizers", "ownerReferences", "deletionTimestamp", "spec"] as const) {
      if (stable(was[field]) !== stable(now[field])) {
        out.push(`${key}: ${field} ${stable(was[field])} → ${stable(now[field])}`);
      }
    }
  }
  for (const key of after.keys()) if (!before.has(key)) out.push(`${key}: appeared`);
  return out;
}

/** Every `<repository>:<tag>` under the stack's prefix. */
export async function snapshotTags(stack: Stack): Promise<Set<string>> {
  const out = new Set<string>();
  for (const repo of await stack.registry.repositories()) {
    if (!repo.startsWith(`${stack.prefix}/`)) continue;
    const vm = repo.slice(stack.prefix.length + 1);
    for (const tag of await stack.registry.tagsOf(repo)) out.add(`${vm}:${tag}`);
  }
  return out;
}

/** Events by uid: reason and count (an aggregated Event counts each repetition). */
export type EventSnapshot = Map<string, { reason: string; count: number }>;

export async function snapshotEvents(stack: Stack): Promise<EventSnapshot> {
  const list = await stack.admin.list(Events, {});
  return new Map(
    list.items.map((e: CoreEvent) => [
      e.metadata.uid ?? "",
      { reason: e.reason ?? "", count: e.count ?? 1 },
    ]),
  );
}

/** Events recorded between two snapshots, by reason. */
export function eventsBetween(before: EventSnapshot, after: EventSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [uid, e] of after) {
    const n = e.count - (before.get(uid)?.count ?? 0);
    if (n > 0) out[e.reason] = (out[e.reason] ?? 0) + n;
  }
  return sortedRecord(out);
}

export function sortedRecord(r: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => a.localeCompare(b)));
}

function countBy<T>(items: T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return sortedRecord(out);
}

/** `cocoonsets.cocoonset.cocoonstack.io/status` → `cocoonsets/status`. */
function withoutGroup(resource: string): string {
  return resource.replace(/\.[^/]*/, "");
}

/** The API figures of one step: requests by verb, status writes, answers 403. */
export function apiFigures(api: ApiProxy, from: number, to: number): {
  requestsByVerb: Record<string, number>;
  statusWrites: Record<string, number>;
  objectWrites: Record<string, number>;
  forbidden: Record<string, number>;
} {
  const reqs = api.between(from, to);
  const writes = reqs.filter((r) => ["create", "update", "patch", "delete"].includes(r.verb));
  return {
    requestsByVerb: countBy(reqs, (r) => r.verb),
    statusWrites: countBy(
      writes.filter((r) => r.resource.endsWith("/status")),
      (r) => `${r.verb} ${withoutGroup(r.resource)}`,
    ),
    objectWrites: countBy(
      writes.filter((r) => !r.resource.endsWith("/status")),
      (r) => `${r.verb} ${withoutGroup(r.resource)}`,
    ),
    forbidden: countBy(reqs.filter((r) => r.status === 403), (r) => `${r.verb} ${r.resource}`),
  };
}

/**
 * Waits until the build holds the Lease (taking it from previousHolder) and then made no write to a pod or a CR (Events, Leases
 * and status writes aside) for quietMs: it has taken over and its first passes are done.
 * Resolves with the moment it took the Lease (performance.now()); rejects, quoting the process
 * output, when it exits or the deadline passes.
 */
export async function waitTakenOver(
  rt: RoundTrip,
  run: RunningBuild,
  opts: { previousHolder: string; quietMs: number; timeoutMs: number },
): Promise<number> {
  const fail = (why: string) =>
    new Error(
      `${run.build} (${run.label}) ${why}\n--- its output ---\n${run.op.proc.output.slice(-4000)}`,
    );
  let tookAt = 0;
  try {
    await waitUntil(async () => {
      if (run.exited()) return "exited";
      if (!tookAt) {
        const lease = await rt.lease();
        const holder = lease?.spec?.holderIdentity ?? "";
        if (holder !== opts.previousHolder && rt.holds(run, lease)) tookAt = performance.now();
      }
      if (!tookAt) return false;
      const last = rt.api.requests.findLast((r) =>
        ["create", "update", "patch", "delete"].includes(r.verb) &&
        !r.resource.endsWith("/status") && !r.resource.startsWith("events") &&
        !r.resource.startsWith("leases")
      );
      return performance.now() - Math.max(tookAt, last?.at ?? 0) >= opts.quietMs;
    }, {
      what: `${run.build} holding the Lease, then quiet for ${opts.quietMs} ms`,
      timeoutMs: opts.timeoutMs,
      intervalMs: 200,
    });
  } catch (err) {
    const lease = await rt.lease().catch(() => undefined);
    throw fail(
      `${(err as Error).message}; Lease holder: ${lease?.spec?.holderIdentity || "none"}`,
    );
  }
  if (run.exited()) throw fail("exited");
  return tookAt;
}
