/**
 * One operator process of the model-based test: a CocoonSetReconciler and a
 * HibernationReconciler sharing one client and one registry, as the manager wires them, with the
 * two faults the model injects:
 *
 * - **cache lag**: for one pass, the cached reads (get and list of pods, CocoonSets and
 *   CocoonHibernations through the manager's client) answer from a copy of the store taken some
 *   steps earlier, as an informer that has not caught up does; uncached reads (apiReader) and
 *   every write reach the current store, so a write computed from the stale copy meets the
 *   API server's optimistic lock where it carries a resourceVersion.
 * - **crash**: the process dies right after its Nth write has landed (API create, update,
 *   patch, delete, status or subresource write, registry DELETE): the write is stored, the call
 *   throws, the pass's signal aborts and every later call of the process throws. The test then
 *   goes on with a fresh process (both reconcilers new, nothing carried over).
 *
 * Every registry DELETE is judged by the vk-cocoon model before it lands (see
 * VkModel.judgeTagDelete), with the production file that sent it as the finding's site.
 *
 * @module
 */
import type {
  Client,
  DeleteOptions,
  GetOptions,
  ListOptions,
  PatchBody,
  PatchOptions,
  PatchType,
  WatchEvent,
  WatchOptions,
  WriteOptions,
} from "../../kube/client.ts";
import { Pods } from "../../kube/core.ts";
import { newApiError } from "../../kube/errors.ts";
import type { KubeObject, ObjectList } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";
import { matchesFields, matchesLabels, parseLabelSelector } from "../../kube/selector.ts";
import type { FakeClient } from "../../kube/testing/fake.ts";
import type { FakeClock } from "../../kube/testing/fake_clock.ts";
import { RecordingRecorder } from "../../kube/testing/recorder.ts";
import { CocoonHibernations, CocoonSets } from "../../common/apis/v1/resources.ts";
import { CocoonSetReconciler } from "../../cocoonset/reconciler.ts";
import { HibernationReconciler } from "../../hibernation/reconciler.ts";
import type { Registry } from "../../snapshot/registry.ts";
import type { FakeRegistry } from "../../snapshot/testing/fake.ts";
import type { Violation, VkModel } from "./_vk_model.ts";

/** The kinds an informer cache holds for the operator (and the lag applies to). */
export const CachedKinds: readonly ResourceType[] = [Pods, CocoonSets, CocoonHibernations];

/** A copy of the cached kinds at one moment. */
export type StoreCopy = Map<ResourceType, KubeObject[]>;

/** Copies the cached kinds of the store, all namespaces. */
export async function copyStore(fake: FakeClient): Promise<StoreCopy> {
  const copy: StoreCopy = new Map();
  for (const rt of CachedKinds) copy.set(rt, (await fake.list(rt, {})).items);
  return copy;
}

/** What the killed process throws from its killing write on. */
export class Killed extends Error {
  constructor(write: number) {
    super(`operator killed after write ${write}`);
    this.name = "Killed";
  }
}

/** What every process of one run shares: the world and the record of writes. */
export interface ProcessWorld {
  fake: FakeClient;
  registry: FakeRegistry;
  clock: FakeClock;
  vk: VkModel;
  /** Each operator write, described, across all processes of the run. */
  writes: string[];
  /** Violations the operator's writes committed (registry deletes judged before landing). */
  violations: Violation[];
  /** The object whose pass is running ("CocoonSet ns/name"), for naming who deleted a tag. */
  acting?: { kind: string; ns: string; name: string };
}

/** One operator process; see the module doc. */
export class OperatorProcess {
  readonly #abort = new AbortController();
  readonly sets: CocoonSetReconciler;
  readonly hibernations: HibernationReconciler;
  readonly recorder = new RecordingRecorder();
  dead = false;
  /** Kill after this many more writes (0: never). */
  killAfter = 0;
  /** The stale copy cached reads answer from during this pass (undefined: fresh). */
  lag: StoreCopy | undefined;
  #writesSinceArm = 0;

  constructor(readonly world: ProcessWorld) {
    const cached = new ProcessClient(this, true);
    const uncached = new ProcessClient(this, false);
    const registry: Registry = {
      hasManifest: (name, reference, signal) => {
        this.ensureAlive();
        return world.registry.hasManifest(name, reference, signal);
      },
      deleteManifest: (name, reference, signal) => {
        const site = callerSite(new Error().stack ?? "");
        return this.write(`registry DELETE ${name}:${reference} (${site})`, async () => {
          const violation = world.vk.judgeTagDelete(name, reference, site);
          const by = world.acting;
          if (violation && by) {
            violation.what += `; deleted by the pass of ${by.kind} ${by.ns}/${by.name}`;
            // The contract's VM names start with vk-<namespace>-: another namespace's VM.
            if (!name.startsWith(`vk-${by.ns}-`)) violation.kind += " of another namespace's VM";
          }
          await world.registry.deleteManifest(name, reference, signal);
          if (violation) world.violations.push(violation);
        });
      },
    };
    this.sets = new CocoonSetReconciler({
      client: cached,
      apiReader: uncached,
      registry,
      recorder: this.recorder,
      clock: world.clock,
    });
    this.hibernations = new HibernationReconciler({
      client: cached,
      apiReader: uncached,
      registry,
      recorder: this.recorder,
      clock: world.clock,
    });
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Arms the crash: the process dies after n more writes (0: never). */
  armKill(n: number): void {
    this.killAfter = n;
    this.#writesSinceArm = 0;
  }

  ensureAlive(): void {
    if (this.dead) throw new Killed(this.world.writes.length);
  }

  /** Sends one write; the process dies once the armed number of writes has landed. */
  async write<T>(what: string, send: () => Promise<T>): Promise<T> {
    this.ensureAlive();
    const out = await send();
    this.world.writes.push(what);
    this.#writesSinceArm++;
    if (this.killAfter > 0 && this.#writesSinceArm >= this.killAfter) {
      this.dead = true;
      const err = new Killed(this.world.writes.length);
      this.#abort.abort(err);
      throw err;
    }
    return out;
  }
}

/** The production file (and line) that made the call whose stack this is. */
function callerSite(stack: string): string {
  for (const line of stack.split("\n").slice(2)) {
    const m = line.match(/\/((?:cocoonset|hibernation)\/[a-z_]+\.ts):(\d+)/);
    if (m) return `${m[1]}:${m[2]}`;
  }
  return "unknown site";
}

/** The process's view of the API; cached reads may answer from the pass's stale copy. */
class ProcessClient implements Client {
  readonly #fake: FakeClient;

  constructor(readonly proc: OperatorProcess, readonly cached: boolean) {
    this.#fake = proc.world.fake;
  }

  #stale(rt: ResourceType): KubeObject[] | undefined {
    return this.cached ? this.proc.lag?.get(rt) : undefined;
  }

  get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T> {
    this.proc.ensureAlive();
    const stale = this.#stale(rt);
    if (!stale) return this.#fake.get(rt, namespace, name, opts);
    const hit = stale.find((o) =>
      o.metadata.name === name && (o.metadata.namespace ?? "") === namespace
    );
    if (!hit) {
      return Promise.reject(
        newApiError(404, "NotFound", { resource: rt.plural, namespace, name }, "not found"),
      );
    }
    return Promise.resolve(structuredClone(hit) as T);
  }

  list<T extends KubeObject>(rt: ResourceType<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    this.proc.ensureAlive();
    const stale = this.#stale(rt);
    if (!stale) return this.#fake.list(rt, opts);
    const selector = parseLabelSelector(opts.labelSelector);
    const fields = Object.entries(opts.matchingFields ?? {}).map(([field, value]) => ({
      field,
      op: "=" as const,
      value,
    }));
    const items = stale.filter((o) =>
      (opts.namespace === undefined || (o.metadata.namespace ?? "") === opts.namespace) &&
      matchesLabels(selector, o.metadata.labels) && matchesFields(o, fields)
    );
    return Promise.resolve({ metadata: {}, items: structuredClone(items) as T[] });
  }

  watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>> {
    this.proc.ensureAlive();
    return this.#fake.watch(rt, opts);
  }

  create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    if (opts?.dryRun) {
      this.proc.ensureAlive();
      return this.#fake.create(rt, obj, opts);
    }
    return this.proc.write(
      `create ${rt.plural} ${obj.metadata.namespace}/${obj.metadata.name}`,
      () => this.#fake.create(rt, obj, opts),
    );
  }

  update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.proc.write(
      `update ${rt.plural} ${obj.metadata.namespace}/${obj.metadata.name}`,
      () => this.#fake.update(rt, obj, opts),
    );
  }

  updateStatus<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.proc.write(
      `status ${rt.plural} ${obj.metadata.namespace}/${obj.metadata.name}`,
      () => this.#fake.updateStatus(rt, obj, opts),
    );
  }

  createSubresource(
    rt: ResourceType,
    namespace: string,
    name: string,
    subresource: string,
    body: KubeObject,
    opts?: WriteOptions,
  ): Promise<unknown> {
    return this.proc.write(
      `create ${rt.plural}/${subresource} ${namespace}/${name}`,
      () => this.#fake.createSubresource(rt, namespace, name, subresource, body, opts),
    );
  }

  patch<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    type: PatchType,
    patch: PatchBody,
    opts?: PatchOptions,
  ): Promise<T> {
    return this.proc.write(
      describePatch(rt, `${namespace}/${name}`, patch, opts?.subresource),
      () => this.#fake.patch(rt, namespace, name, type, patch, opts),
    );
  }

  delete<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: DeleteOptions,
  ): Promise<T | undefined> {
    return this.proc.write(
      `delete ${rt.plural} ${namespace}/${name}`,
      () => this.#fake.delete(rt, namespace, name, opts),
    );
  }
}

/** A short name for a write, for the step trace: what it changes, not its full body. */
function describePatch(
  rt: ResourceType,
  name: string,
  patch: PatchBody,
  subresource: string | undefined,
): string {
  const body = patch as {
    metadata?: { annotations?: Record<string, unknown>; finalizers?: unknown };
    status?: Record<string, unknown>;
  };
  if (subresource === "status") {
    const phase = body.status?.phase;
    const fields = phase ? `phase=${phase}` : Object.keys(body.status ?? {}).join(",");
    return `status ${rt.plural} ${name} ${fields}`;
  }
  const keys = Object.entries(body.metadata?.annotations ?? {}).map(([k, v]) =>
    `${k.slice(k.indexOf("/") + 1)}${v === null ? "-" : "+"}`
  );
  if (body.metadata?.finalizers !== undefined) keys.push("finalizers");
  return `patch ${rt.plural} ${name} ${keys.join(",") || Object.keys(patch).join(",")}`;
}
