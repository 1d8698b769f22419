import {
  type Client,
  type DeleteOptions,
  type GetOptions,
  INITIAL_EVENTS_END_ANNOTATION,
  type JsonPatchOp,
  type LabelSelector,
  type ListOptions,
  type PatchBody,
  type PatchOptions,
  type PatchType,
  type WatchEvent,
  type WatchOptions,
  type WriteOptions,
} from "../client.ts";
import { ApiError, type ErrorTarget, newApiError } from "../errors.ts";
import { deepCopy, keyString, type KubeObject, objectKey, type ObjectList } from "../object.ts";
import { applyJsonPatch, applyMergePatch, jsonEqual, PatchError } from "../patch.ts";
import { apiVersionOf, resourceId, type ResourceType } from "../resource.ts";
import {
  type FieldRequirement,
  fieldSelectorString,
  labelSelectorString,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "../selector.ts";
import { parseShardSelector, renderShardSelector, selectorMatches } from "../sharding/selector.ts";
import { rfc3339 } from "../time.ts";
import { type Clock, realClock } from "../clock.ts";
import type { AccessNeed } from "../access_review.ts";
import {
  allows,
  answerSelfReview,
  type FakeAccess,
  forbidden,
  isSelfReview,
} from "./fake_access.ts";

/** What a reactor sees: the verb and the target, like client-go's testing.Action. */
export interface FakeAction {
  verb: "get" | "list" | "create" | "update" | "patch" | "delete" | "watch";
  resource: ResourceType;
  namespace: string;
  name: string;
  /** "status" for status writes; the subresource's name for createSubresource ("binding"). */
  subresource?: string;
  /** For creates and updates: the object as sent (a copy the caller's later edits do not reach). */
  object?: KubeObject;
  /** For patches: the patch type and the body exactly as sent. */
  patchType?: PatchType;
  patch?: PatchBody;
  /** For deletes: the options as sent. */
  deleteOptions?: DeleteOptions;
  /** For writes: a server-side dry run (nothing is stored). */
  dryRun?: boolean;
  /** For lists and watches: the selectors in the API server's query-string form, if any. */
  labelSelector?: string;
  fieldSelector?: string;
  /** For lists and watches: the shardSelector as sent, if any. */
  shardSelector?: string;
  /** For watches: a watch-list stream (the current state first) was asked for. */
  sendInitialEvents?: boolean;
}

/**
 * A reactor may throw (or return) an error to inject a fault, or return undefined to let the
 * call proceed. Reactors run before the store is touched.
 */
export type Reactor = (action: FakeAction) => Error | undefined | Promise<Error | undefined>;

export interface FakeClientOptions {
  /** Objects stored verbatim (status included), like controller-runtime's WithObjects. */
  objects?: { rt: ResourceType; obj: KubeObject }[];
  /** How many past events per resource are kept for watch resumption (older → 410). */
  historyLimit?: number;
  /** Latency added to every call, for tests of slow APIs. */
  latencyMs?: number;
  /** Time source of creationTimestamp and deletionTimestamp (default: the wall clock). */
  clock?: Clock;
  /**
   * Refuse watch-list streams (sendInitialEvents) with 422 Invalid, as an API server with the
   * WatchList feature gate off does (default false: they are served).
   */
  refuseWatchList?: boolean;
  /**
   * Apply a list's shardSelector and echo it in metadata.shardInfo, as Kubernetes 1.36 with the
   * ShardedListAndWatch gate and no watch cache does (watches stay unfiltered). Default false:
   * the parameter is recorded and ignored, as 1.35 does.
   */
  applyShardSelector?: boolean;
  /**
   * The identity's RBAC (fake_access.ts): every request the rules do not allow is answered 403,
   * and SelfSubjectRulesReviews / SelfSubjectAccessReviews are answered from them. Absent: every
   * request is allowed, and the reviews say so.
   */
  access?: FakeAccess;
}

interface StoredEvent {
  rv: number;
  type: "ADDED" | "MODIFIED" | "DELETED";
  obj: KubeObject;
  /** The object before a MODIFIED event, so filtered watches see objects enter and leave. */
  prev?: KubeObject;
}

type StreamItem = StoredEvent | { rv: number; type: "BOOKMARK"; initialEventsEnd?: boolean };

interface WatchSubscriber {
  rt: ResourceType;
  push(ev: StreamItem): void;
  close(err?: ApiError): void;
}

interface Table {
  rt: ResourceType;
  objects: Map<string, KubeObject>;
  history: StoredEvent[];
  /** Lowest resourceVersion a watch may resume from; older ones get 410. */
  compactedRv: number;
}

const DEFAULT_HISTORY_LIMIT = 10_000;
/** Open paginated lists kept for continuation; older tokens expire (410), as etcd's would. */
const MAX_CONTINUATIONS = 1_000;

/** The rest of a paginated list: the snapshot taken by its first page. */
interface Continuation {
  rv: string;
  items: KubeObject[];
}

/**
 * An in-memory API server with the semantics reconcilers rely on: resourceVersion and
 * Conflict on stale writes, generation bumped on spec changes for kinds with a status
 * subresource, spec/status isolation both ways, finalizers and deletionTimestamp, graceful
 * deletion of bound pods, merge and JSON patch, selectors, and watch streams that resume
 * from a resourceVersion or fail with 410 once compacted. It runs the cache and the
 * controllers unchanged. Like envtest without a controller-manager, it never garbage
 * collects owned objects.
 */
export class FakeClient implements Client {
  #tables = new Map<string, Table>();
  // Starts above 0: "0" means "any version" to a watch, so no list may ever report it.
  #rv = 1;
  #uid = 0;
  #subscribers = new Set<WatchSubscriber>();
  #reactors: Reactor[] = [];
  #historyLimit: number;
  #continuations = new Map<string, Continuation>();
  #continueSeq = 0;
  readonly #clock: Clock;
  /** Watch-list streams are refused (the WatchList feature gate off). Mutable for tests. */
  refuseWatchList: boolean;
  /** Lists apply shardSelector (see FakeClientOptions.applyShardSelector). Mutable for tests. */
  applyShardSelector: boolean;
  /** Latency added to every call (ms). Mutable so a test can slow the API down mid-run. */
  latencyMs: number;
  /** The identity's RBAC (FakeClientOptions.access). Mutable: a test grants or revokes mid-run. */
  access: FakeAccess | undefined;
  /** Every call made, in order (for assertions on request counts). */
  readonly actions: FakeAction[] = [];

  constructor(opts: FakeClientOptions = {}) {
    this.#historyLimit = opts.historyLimit ?? DEFAULT_HISTORY_LIMIT;
    this.latencyMs = opts.latencyMs ?? 0;
    this.#clock = opts.clock ?? realClock;
    this.refuseWatchList = opts.refuseWatchList ?? false;
    this.applyShardSelector = opts.applyShardSelector ?? false;
    this.access = opts.access;
    for (const { rt, obj } of opts.objects ?? []) this.seed(rt, obj);
  }

  /** Adds a reactor that runs before every call (fault injection). */
  addReactor(reactor: Reactor): () => void {
    this.#reactors.push(reactor);
    return () => {
      this.#reactors = this.#reactors.filter((r) => r !== reactor);
    };
  }

  /** Stores an object as given (status kept), filling uid/resourceVersion/timestamps. */
  seed<T extends KubeObject>(rt: ResourceType<T>, obj: T): T {
    const stored = onTheWire(obj);
    this.#fillSystemFields(rt, stored);
    if (rt.statusSubresource && stored.metadata.generation === undefined) {
      stored.metadata.generation = 1;
    }
    stored.metadata.resourceVersion = String(++this.#rv);
    const table = this.#table(rt);
    const key = keyString(objectKey(stored));
    const prev = table.objects.get(key);
    table.objects.set(key, stored);
    this.#record(table, prev ? "MODIFIED" : "ADDED", stored, prev);
    return deepCopy(stored);
  }

  /** The current resourceVersion of the whole store (like etcd's revision). */
  get resourceVersion(): string {
    return String(this.#rv);
  }

  /** Forgets watch history so resuming from any older resourceVersion yields 410 Gone. */
  compact(): void {
    for (const table of this.#tables.values()) {
      table.history = [];
      table.compactedRv = this.#rv;
    }
  }

  /** Ends every open watch stream (like an API server restart or a dropped connection). */
  closeWatches(): void {
    for (const sub of [...this.#subscribers]) sub.close();
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch that asked for them. */
  sendBookmarks(): void {
    for (const sub of this.#subscribers) sub.push({ rv: this.#rv, type: "BOOKMARK" });
  }

  /** Number of open watch streams (for leak assertions). */
  get openWatches(): number {
    return this.#subscribers.size;
  }

  async get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    _opts?: GetOptions,
  ): Promise<T> {
    await this.#enter({ verb: "get", resource: rt, namespace, name });
    const obj = this.#table(rt).objects.get(this.#key(rt, namespace, name));
    if (!obj) throw this.#notFound(rt, namespace, name);
    return deepCopy(obj) as T;
  }

  async list<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const namespace = opts.namespace ?? "";
    await this.#enter({
      verb: "list",
      resource: rt,
      namespace,
      name: "",
      ...sentSelectors(
        opts.labelSelector,
        [opts.fieldSelector, fieldSelectorString(opts.matchingFields)].filter(Boolean).join(","),
      ),
      ...(opts.shardSelector ? { shardSelector: opts.shardSelector } : {}),
    });
    // Parsed up front so a bad selector fails the request, as the server answers one.
    const shard = this.applyShardSelector && opts.shardSelector
      ? parseShardSelector(opts.shardSelector)
      : undefined;
    // Like the API server, every page of a paginated list comes from the snapshot its first
    // page saw and carries that page's resourceVersion, so a watch started from it misses
    // nothing and repeats nothing.
    let snapshot: Continuation;
    if (opts.continue) {
      const found = this.#continuations.get(opts.continue);
      if (!found) {
        throw newApiError(
          410,
          "Expired",
          this.#target(rt, namespace, ""),
          "The provided continue parameter is too old to display a consistent list result. " +
            "You can start a new list without the continue parameter.",
        );
      }
      this.#continuations.delete(opts.continue);
      snapshot = found;
    } else {
      const labels = parseLabelSelector(opts.labelSelector);
      const fields = this.#fieldRequirements(
        rt,
        namespace,
        [opts.fieldSelector, fieldSelectorString(opts.matchingFields)].filter(Boolean).join(","),
      );
      // Stored objects are replaced on every write, never mutated, so references are a
      // consistent snapshot.
      const items = [...this.#table(rt).objects.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, o]) => o)
        .filter((o) => !namespace || o.metadata.namespace === namespace)
        .filter((o) => matchesLabels(labels, o.metadata.labels) && matchesFields(o, fields))
        .filter((o) => !shard || selectorMatches(shard, o.metadata.namespace ?? ""));
      snapshot = { rv: String(this.#rv), items };
    }
    const all = snapshot.items;
    const end = opts.limit ? Math.min(all.length, opts.limit) : all.length;
    const items = all.slice(0, end).map((o) => (opts.unsafeDisableDeepCopy ? o : deepCopy(o)) as T);
    let cont: string | undefined;
    if (end < all.length) {
      cont = `${snapshot.rv}-${++this.#continueSeq}`;
      this.#continuations.set(cont, { rv: snapshot.rv, items: all.slice(end) });
      if (this.#continuations.size > MAX_CONTINUATIONS) {
        this.#continuations.delete(this.#continuations.keys().next().value!);
      }
    }
    return {
      apiVersion: apiVersionOf(rt),
      kind: `${rt.kind}List`,
      metadata: {
        resourceVersion: snapshot.rv,
        ...(cont ? { continue: cont, remainingItemCount: all.length - end } : {}),
        ...(shard ? { shardInfo: { selector: renderShardSelector(shard) } } : {}),
      },
      items,
    };
  }

  async create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    const namespace = obj.metadata.namespace ?? "";
    let name = obj.metadata.name ?? "";
    const sent = onTheWire(obj);
    await this.#enter({
      verb: "create",
      resource: rt,
      namespace,
      name,
      object: sent,
      ...dryRunOf(opts),
    });
    // The self-reviews are answered, never stored, as the API server does.
    if (isSelfReview(rt)) return answerSelfReview(rt, sent, this.access) as T;
    if (!name && obj.metadata.generateName) name = obj.metadata.generateName + randomSuffix();
    if (!name) {
      throw this.#invalid(
        rt,
        namespace,
        name,
        "metadata.name: Required value: name or generateName is required",
      );
    }
    if (rt.namespaced && !namespace) {
      throw this.#invalid(rt, namespace, name, "metadata.namespace: Required value");
    }
    if (obj.metadata.resourceVersion) {
      throw this.#invalid(
        rt,
        namespace,
        name,
        "metadata.resourceVersion: Invalid value: must not be set on create",
      );
    }
    const table = this.#table(rt);
    const key = this.#key(rt, namespace, name);
    if (table.objects.has(key)) {
      throw newApiError(
        409,
        "AlreadyExists",
        this.#target(rt, namespace, name),
        `${rt.plural} "${name}" already exists`,
      );
    }
    // The recorded copy stays as sent; the stored one gets the server's fields.
    const stored = deepCopy(sent);
    stored.apiVersion = apiVersionOf(rt);
    stored.kind = rt.kind;
    stored.metadata.name = name;
    delete stored.metadata.deletionTimestamp;
    delete stored.metadata.deletionGracePeriodSeconds;
    delete stored.metadata.managedFields;
    this.#fillSystemFields(rt, stored);
    if (rt.statusSubresource) {
      stored.metadata.generation = 1;
      resetStatusOnCreate(rt, stored);
    }
    if (opts?.dryRun) return deepCopy(stored) as T;
    stored.metadata.resourceVersion = String(++this.#rv);
    table.objects.set(key, stored);
    this.#record(table, "ADDED", stored);
    return deepCopy(stored) as T;
  }

  async update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    const { namespace, name } = objectKey(obj);
    await this.#enter({
      verb: "update",
      resource: rt,
      namespace,
      name,
      object: onTheWire(obj),
      ...dryRunOf(opts),
    });
    this.#requireRvForCustomResource(rt, namespace, name, obj);
    return this.#write(rt, namespace, name, obj, false, opts);
  }

  async updateStatus<T extends KubeObject>(
    rt: ResourceType<T>,
    obj: T,
    opts?: WriteOptions,
  ): Promise<T> {
    const { namespace, name } = objectKey(obj);
    await this.#enter({
      verb: "update",
      resource: rt,
      namespace,
      name,
      subresource: "status",
      object: onTheWire(obj),
      ...dryRunOf(opts),
    });
    if (!rt.statusSubresource) throw this.#notFound(rt, namespace, name);
    this.#requireRvForCustomResource(rt, namespace, name, obj);
    return this.#write(rt, namespace, name, obj, true, opts);
  }

  async patch<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    type: PatchType,
    patch: PatchBody,
    opts?: PatchOptions,
  ): Promise<T> {
    const subresource = opts?.subresource;
    const body = onTheWire(patch);
    await this.#enter({
      verb: "patch",
      resource: rt,
      namespace,
      name,
      subresource,
      patchType: type,
      patch: deepCopy(body),
      ...dryRunOf(opts),
    });
    if (subresource === "status" && !rt.statusSubresource) {
      throw this.#notFound(rt, namespace, name);
    }
    const current = this.#table(rt).objects.get(this.#key(rt, namespace, name));
    if (!current) throw this.#notFound(rt, namespace, name);
    let patched: KubeObject;
    try {
      patched = (type === "merge"
        ? applyMergePatch(current, body)
        : applyJsonPatch(current, body as JsonPatchOp[])) as KubeObject;
    } catch (err) {
      if (err instanceof PatchError) throw this.#invalid(rt, namespace, name, err.message);
      throw err;
    }
    if (!patched || typeof patched !== "object" || typeof patched.metadata !== "object") {
      throw this.#invalid(rt, namespace, name, "patch removed metadata");
    }
    // A patch carries a resourceVersion only when the caller wants optimistic locking; without
    // one it applies to whatever is current.
    const wantsLock = type === "merge"
      ? typeof (body as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion ===
        "string"
      : (body as JsonPatchOp[]).some((op) => op.path === "/metadata/resourceVersion");
    if (!wantsLock) patched.metadata.resourceVersion = current.metadata.resourceVersion;
    return this.#write(rt, namespace, name, patched as T, subresource === "status", opts);
  }

  /**
   * Only a pod's `binding` is served, with the API server's rules: the Binding must name the pod
   * and a node; a pod already bound (or being deleted) answers Conflict; uid / resourceVersion in
   * the Binding's metadata are preconditions. Binding sets spec.nodeName, copies the Binding's
   * annotations and marks the pod PodScheduled=True. Any other subresource is NotFound.
   */
  async createSubresource(
    rt: ResourceType,
    namespace: string,
    name: string,
    subresource: string,
    body: KubeObject,
    opts?: WriteOptions,
  ): Promise<unknown> {
    await this.#enter({
      verb: "create",
      resource: rt,
      namespace,
      name,
      subresource,
      object: structuredClone(body),
      ...(opts?.dryRun ? { dryRun: true } : {}),
    });
    if (!isPods(rt) || subresource !== "binding") {
      throw newApiError(
        404,
        "NotFound",
        this.#target(rt, namespace, name),
        "the server could not find the requested resource",
      );
    }
    const target: ErrorTarget = { resource: "pods/binding", namespace, name };
    const binding = body as KubeObject & { target?: { name?: unknown } };
    if (binding.metadata?.name !== name) {
      throw newApiError(
        400,
        "BadRequest",
        target,
        "name in URL does not match name in Binding object",
      );
    }
    const node = binding.target?.name;
    if (typeof node !== "string" || node === "") {
      throw this.#invalid(rt, namespace, name, "target.name: Required value");
    }
    const table = this.#table(rt);
    const key = this.#key(rt, namespace, name);
    const current = table.objects.get(key) as BindablePod | undefined;
    if (!current) throw this.#notFound(rt, namespace, name);
    const refuse = (why: string) =>
      newApiError(
        409,
        "Conflict",
        target,
        `Operation cannot be fulfilled on pods/binding "${name}": ${why}`,
      );
    const { uid, resourceVersion } = binding.metadata;
    if (uid && uid !== current.metadata.uid) {
      throw refuse(
        `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${current.metadata.uid}`,
      );
    }
    if (resourceVersion && resourceVersion !== current.metadata.resourceVersion) {
      throw refuse(
        `Precondition failed: ResourceVersion in precondition: ${resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`,
      );
    }
    if (current.metadata.deletionTimestamp) {
      throw refuse(`pod ${name} is being deleted, cannot be assigned to a host`);
    }
    if (current.spec?.nodeName) {
      throw refuse(`pod ${name} is already assigned to node "${current.spec.nodeName}"`);
    }
    const success = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      code: 201,
    };
    if (opts?.dryRun) return success;
    const next = deepCopy(current);
    next.spec = { ...next.spec, nodeName: node };
    if (binding.metadata.annotations) {
      next.metadata.annotations = { ...next.metadata.annotations, ...binding.metadata.annotations };
    }
    const conditions = (next.status?.conditions ?? []).filter((c) => c.type !== "PodScheduled");
    const was = current.status?.conditions?.find((c) => c.type === "PodScheduled");
    conditions.push({
      type: "PodScheduled",
      status: "True",
      lastTransitionTime: was?.status === "True" && was.lastTransitionTime
        ? was.lastTransitionTime
        : rfc3339(this.#clock.now()),
    });
    next.status = { ...next.status, conditions };
    next.metadata.resourceVersion = String(++this.#rv);
    table.objects.set(key, next);
    this.#record(table, "MODIFIED", next, current);
    return success;
  }

  async delete<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts: DeleteOptions = {},
  ): Promise<T | undefined> {
    await this.#enter({ verb: "delete", resource: rt, namespace, name, deleteOptions: opts });
    const table = this.#table(rt);
    const key = this.#key(rt, namespace, name);
    const current = table.objects.get(key);
    if (!current) throw this.#notFound(rt, namespace, name);
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== current.metadata.uid) {
      throw this.#conflict(
        rt,
        namespace,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid}`,
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) {
      throw this.#conflict(
        rt,
        namespace,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`,
      );
    }
    const next = deepCopy(current);
    const finalizers = next.metadata.finalizers ?? [];
    if (opts.propagationPolicy === "Foreground" && !finalizers.includes("foregroundDeletion")) {
      finalizers.push("foregroundDeletion");
    } else if (opts.propagationPolicy === "Orphan" && !finalizers.includes("orphan")) {
      finalizers.push("orphan");
    }
    const grace = gracefulPeriod(rt, next, opts.gracePeriodSeconds);
    if (finalizers.length === 0 && grace === 0) {
      table.objects.delete(key);
      this.#rv++;
      const gone = deepCopy(next);
      gone.metadata.resourceVersion = String(this.#rv);
      this.#record(table, "DELETED", gone);
      return undefined;
    }
    // Marked for deletion: it stays until the finalizers are removed (or, for a bound pod, until
    // its kubelet confirms with a zero-grace delete).
    if (!next.metadata.deletionTimestamp) {
      next.metadata.deletionTimestamp = rfc3339(this.#clock.now() + grace * 1000);
      next.metadata.deletionGracePeriodSeconds = grace;
      if (next.metadata.generation !== undefined) next.metadata.generation++;
    } else if (grace < (next.metadata.deletionGracePeriodSeconds ?? 0)) {
      next.metadata.deletionGracePeriodSeconds = grace;
    }
    if (finalizers.length > 0) next.metadata.finalizers = finalizers;
    if (jsonEqual(next, current)) return deepCopy(current) as T;
    next.metadata.resourceVersion = String(++this.#rv);
    table.objects.set(key, next);
    this.#record(table, "MODIFIED", next, current);
    return deepCopy(next) as T;
  }

  watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>> {
    return this.#watch(rt, opts) as AsyncIterable<WatchEvent<T>>;
  }

  async *#watch(rt: ResourceType, opts: WatchOptions): AsyncGenerator<WatchEvent<KubeObject>> {
    const namespace = opts.namespace ?? "";
    await this.#enter({
      verb: "watch",
      resource: rt,
      namespace,
      name: "",
      ...sentSelectors(opts.labelSelector, opts.fieldSelector),
      ...(opts.shardSelector ? { shardSelector: opts.shardSelector } : {}),
      ...(opts.sendInitialEvents ? { sendInitialEvents: true } : {}),
    });
    if (opts.sendInitialEvents || opts.resourceVersionMatch) this.#checkWatchList(rt, opts);
    const labels = parseLabelSelector(opts.labelSelector);
    const fields = this.#fieldRequirements(rt, namespace, opts.fieldSelector);
    const matches = (o: KubeObject) =>
      (!namespace || o.metadata.namespace === namespace) &&
      matchesLabels(labels, o.metadata.labels) && matchesFields(o, fields);
    const table = this.#table(rt);
    const pending: StreamItem[] = [];
    let closed = false;
    let closeError: ApiError | undefined;
    let wake: (() => void) | undefined;
    const notify = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const sub: WatchSubscriber = {
      rt,
      push: (ev) => {
        if (ev.type === "BOOKMARK" && !opts.allowWatchBookmarks) return;
        pending.push(ev);
        notify();
      },
      close: (err) => {
        closed = true;
        closeError = err;
        notify();
      },
    };
    const startRv = opts.resourceVersion && opts.resourceVersion !== "0"
      ? Number(opts.resourceVersion)
      : undefined;
    if (opts.sendInitialEvents) {
      // Watch-list: the current state (at least as new as any resourceVersion asked for) as
      // ADDED events, then (only to a watch that allows bookmarks) the bookmark marking its
      // end; changes follow.
      for (const o of [...table.objects.values()]) {
        pending.push({ rv: Number(o.metadata.resourceVersion), type: "ADDED", obj: o });
      }
      if (opts.allowWatchBookmarks) {
        pending.push({ rv: this.#rv, type: "BOOKMARK", initialEventsEnd: true });
      }
    } else if (startRv === undefined) {
      // No resourceVersion: the server first replays the current state as ADDED events.
      for (const o of [...table.objects.values()]) {
        pending.push({ rv: Number(o.metadata.resourceVersion), type: "ADDED", obj: o });
      }
    } else if (startRv < table.compactedRv) {
      yield {
        type: "ERROR",
        object: {
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          reason: "Expired",
          code: 410,
          message: `too old resource version: ${startRv} (${table.compactedRv})`,
        },
      };
      return;
    } else {
      for (const ev of table.history) if (ev.rv > startRv) pending.push(ev);
    }
    this.#subscribers.add(sub);
    opts.onOpen?.();
    const timer = opts.timeoutSeconds
      ? setTimeout(() => sub.close(), opts.timeoutSeconds * 1000)
      : undefined;
    const onAbort = () => sub.close();
    opts.signal?.addEventListener("abort", onAbort);
    try {
      while (true) {
        while (pending.length > 0) {
          const ev = pending.shift()!;
          if (ev.type === "BOOKMARK") {
            yield {
              type: "BOOKMARK",
              object: {
                kind: rt.kind,
                apiVersion: apiVersionOf(rt),
                metadata: {
                  resourceVersion: String(ev.rv),
                  ...(ev.initialEventsEnd
                    ? { annotations: { [INITIAL_EVENTS_END_ANNOTATION]: "true" } }
                    : {}),
                },
              },
            };
            continue;
          }
          const now = matches(ev.obj);
          const before = ev.type === "MODIFIED" && ev.prev ? matches(ev.prev) : now;
          // Like the API server, a filtered watch reports objects entering the filter as
          // ADDED and leaving it as DELETED.
          if (now && before) yield { type: ev.type, object: deepCopy(ev.obj) };
          else if (now) yield { type: "ADDED", object: deepCopy(ev.obj) };
          else if (before) yield { type: "DELETED", object: deepCopy(ev.obj) };
        }
        if (closed || opts.signal?.aborted) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
      if (closeError) throw closeError;
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      this.#subscribers.delete(sub);
    }
  }

  /**
   * Custom resources refuse unconditional updates (their strategy does not allow them), while
   * built-in kinds such as ConfigMaps and Leases accept an update without a resourceVersion.
   * Patches are unaffected: the server applies them to the current version.
   */
  #requireRvForCustomResource(
    rt: ResourceType,
    namespace: string,
    name: string,
    obj: KubeObject,
  ): void {
    if (!isCustomResource(rt) || obj.metadata.resourceVersion) return;
    // A missing object is NotFound whatever the request says.
    if (!this.#table(rt).objects.has(this.#key(rt, namespace, name))) return;
    throw this.#invalid(
      rt,
      namespace,
      name,
      "metadata.resourceVersion: Invalid value: 0: must be specified for an update",
    );
  }

  /** Shared path of update, updateStatus and patch. */
  #write<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    incoming: T,
    statusOnly: boolean,
    opts?: WriteOptions,
  ): T {
    const table = this.#table(rt);
    const key = this.#key(rt, namespace, name);
    const current = table.objects.get(key);
    if (!current) throw this.#notFound(rt, namespace, name);
    const rv = incoming.metadata.resourceVersion;
    if (rv && rv !== current.metadata.resourceVersion) {
      throw this.#conflict(
        rt,
        namespace,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
      );
    }
    const next = mergeWrite(rt, current, onTheWire(incoming), statusOnly);
    if (current.metadata.deletionTimestamp) {
      const had = new Set(current.metadata.finalizers ?? []);
      const added = (next.metadata.finalizers ?? []).filter((f) => !had.has(f));
      if (added.length > 0) {
        throw this.#invalid(
          rt,
          namespace,
          name,
          "metadata.finalizers: Forbidden: no new finalizers can be added if the object is " +
            `being deleted, found new finalizers ${JSON.stringify(added)}`,
        );
      }
    }
    if (jsonEqual(next, current)) return deepCopy(current) as T; // no-op writes keep the RV
    if (opts?.dryRun) return deepCopy(next) as T;
    if (
      next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0
    ) {
      // The last finalizer is gone: the object is deleted now.
      table.objects.delete(key);
      next.metadata.resourceVersion = String(++this.#rv);
      this.#record(table, "DELETED", next);
      return deepCopy(next) as T;
    }
    next.metadata.resourceVersion = String(++this.#rv);
    table.objects.set(key, next);
    this.#record(table, "MODIFIED", next, current);
    return deepCopy(next) as T;
  }

  #fillSystemFields(rt: ResourceType, obj: KubeObject): void {
    obj.apiVersion = apiVersionOf(rt);
    obj.kind = rt.kind;
    obj.metadata.uid ??= fakeUid(++this.#uid);
    obj.metadata.creationTimestamp ??= rfc3339(this.#clock.now());
    if (!rt.namespaced) delete obj.metadata.namespace;
  }

  #record(table: Table, type: StoredEvent["type"], obj: KubeObject, prev?: KubeObject): void {
    const ev: StoredEvent = {
      rv: Number(obj.metadata.resourceVersion),
      type,
      obj: deepCopy(obj),
      prev: prev ? deepCopy(prev) : undefined,
    };
    table.history.push(ev);
    if (table.history.length > this.#historyLimit) {
      const dropped = table.history.splice(0, table.history.length - this.#historyLimit);
      table.compactedRv = dropped[dropped.length - 1].rv;
    }
    for (const sub of this.#subscribers) if (sub.rt === table.rt) sub.push(ev);
  }

  async #enter(action: FakeAction): Promise<void> {
    this.actions.push(action);
    if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
    for (const reactor of this.#reactors) {
      const err = await reactor(action);
      if (err) throw err;
    }
    if (this.access && !isSelfReview(action.resource)) {
      const need = accessNeedOf(action);
      if (!allows(this.access, need)) throw forbidden(action.resource, need);
    }
  }

  #table(rt: ResourceType): Table {
    const id = resourceId(rt);
    let table = this.#tables.get(id);
    if (!table) {
      table = { rt, objects: new Map(), history: [], compactedRv: 0 };
      this.#tables.set(id, table);
    }
    return table;
  }

  #key(rt: ResourceType, namespace: string, name: string): string {
    return rt.namespaced ? `${namespace}/${name}` : name;
  }

  /**
   * The requirements of a field selector, each reading the path its field label stands for;
   * a label the API server does not offer for the kind is refused as the server does.
   */
  #fieldRequirements(
    rt: ResourceType,
    namespace: string,
    text: string | undefined,
  ): FieldRequirement[] {
    return parseFieldSelector(text).map((r) => {
      const path = metadataFields.has(r.field)
        ? r.field
        : selectableFields[resourceId(rt)]?.[r.field];
      if (path === undefined) {
        throw newApiError(
          400,
          "BadRequest",
          this.#target(rt, namespace, ""),
          `field label not supported: ${r.field}`,
        );
      }
      return { ...r, field: path };
    });
  }

  #target(rt: ResourceType, namespace: string, name: string): ErrorTarget {
    return { resource: resourceId(rt), namespace: rt.namespaced ? namespace : undefined, name };
  }

  #notFound(rt: ResourceType, namespace: string, name: string): ApiError {
    return newApiError(
      404,
      "NotFound",
      this.#target(rt, namespace, name),
      `${resourceId(rt)} "${name}" not found`,
    );
  }

  #conflict(rt: ResourceType, namespace: string, name: string, why: string): ApiError {
    return newApiError(
      409,
      "Conflict",
      this.#target(rt, namespace, name),
      `Operation cannot be fulfilled on ${resourceId(rt)} "${name}": ${why}`,
    );
  }

  /** The API server's validation of a watch's list options (watch-list parameters). */
  #checkWatchList(rt: ResourceType, opts: WatchOptions): void {
    const why: string[] = [];
    if (opts.sendInitialEvents) {
      if (opts.resourceVersionMatch !== "NotOlderThan") {
        why.push(
          "resourceVersionMatch: Forbidden: sendInitialEvents requires setting " +
            "resourceVersionMatch to NotOlderThan",
        );
      }
      if (this.refuseWatchList) {
        why.push(
          "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the " +
            "WatchList feature gate is enabled",
        );
      }
    } else {
      why.push(
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless " +
          "sendInitialEvents is provided",
      );
    }
    if (why.length === 0) return;
    throw newApiError(
      422,
      "Invalid",
      { resource: resourceId(rt), namespace: opts.namespace },
      `ListOptions.meta.k8s.io "" is invalid: ${why.join(", ")}`,
    );
  }

  #invalid(rt: ResourceType, namespace: string, name: string, why: string): ApiError {
    return newApiError(
      422,
      "Invalid",
      this.#target(rt, namespace, name),
      `${rt.kind} "${name}" is invalid: ${why}`,
    );
  }
}

/**
 * Computes the stored object after a write, applying the API server's rules: identity and
 * system fields are kept, status and spec are isolated for kinds with a status subresource,
 * generation moves only when the spec does, and deletionTimestamp cannot be set by a write.
 */
function mergeWrite(
  rt: ResourceType,
  current: KubeObject,
  incoming: KubeObject,
  statusOnly: boolean,
): KubeObject {
  const cur = current as KubeObject & Record<string, unknown>;
  const inc = incoming as KubeObject & Record<string, unknown>;
  let next: KubeObject & Record<string, unknown>;
  if (statusOnly) {
    // The status subresource takes status only; spec and metadata stay as stored.
    next = deepCopy(cur);
    if ("status" in inc) next.status = inc.status;
    else delete next.status;
    return next;
  }
  next = inc;
  next.apiVersion = cur.apiVersion;
  next.kind = cur.kind;
  const m = next.metadata;
  const c = cur.metadata;
  m.name = c.name;
  if (c.namespace !== undefined) m.namespace = c.namespace;
  m.uid = c.uid;
  m.creationTimestamp = c.creationTimestamp;
  m.resourceVersion = c.resourceVersion;
  m.generation = c.generation;
  if (c.deletionTimestamp) {
    m.deletionTimestamp = c.deletionTimestamp;
    m.deletionGracePeriodSeconds = c.deletionGracePeriodSeconds;
  } else {
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
  }
  if (m.generateName === undefined) delete m.generateName;
  delete m.managedFields;
  if (c.managedFields) m.managedFields = c.managedFields;
  if (rt.statusSubresource) {
    if ("status" in cur) next.status = cur.status;
    else delete next.status;
    if (!jsonEqual(withoutMetaAndStatus(next), withoutMetaAndStatus(cur))) {
      m.generation = (c.generation ?? 0) + 1;
    }
  }
  for (const k of Object.keys(m) as (keyof typeof m)[]) if (m[k] === undefined) delete m[k];
  return next;
}

/**
 * A request body as the API server receives it: JSON, so fields holding undefined are not
 * there at all (a write that only adds such fields changes nothing), as the API client sends.
 */
function onTheWire<T>(body: T): T {
  return wireCopy(body) as T;
}

/**
 * JSON.parse(JSON.stringify(v)) for the plain JSON the fake receives, without the string in
 * between (a large share of a fake write's cost): undefined and function members are dropped,
 * in arrays they become null, non-finite numbers become null, toJSON is honoured.
 */
function wireCopy(v: unknown): unknown {
  if (v === null) return null;
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      return Number.isFinite(v) ? v : null;
    case "object": {
      const withJson = v as { toJSON?: () => unknown };
      if (typeof withJson.toJSON === "function") return wireCopy(withJson.toJSON());
      if (Array.isArray(v)) {
        return v.map((x) => {
          const c = wireCopy(x);
          return c === undefined ? null : c;
        });
      }
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v)) {
        const c = wireCopy((v as Record<string, unknown>)[k]);
        if (c !== undefined) out[k] = c;
      }
      return out;
    }
    default:
      return undefined;
  }
}

function withoutMetaAndStatus(obj: Record<string, unknown>): Record<string, unknown> {
  const { metadata: _m, status: _s, ...rest } = obj;
  return rest;
}

/**
 * Whether rt is served from a CustomResourceDefinition: its group has a dot and is not one of
 * Kubernetes' own *.k8s.io groups (every built-in group is either dotless or under k8s.io).
 */
function isCustomResource(rt: ResourceType): boolean {
  return rt.group.includes(".") && !rt.group.endsWith(".k8s.io");
}

/** The fields of a pod the binding subresource reads and writes. */
type BindablePod = KubeObject & {
  spec?: { nodeName?: string } & Record<string, unknown>;
  status?: {
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
  } & Record<string, unknown>;
};

function isPods(rt: ResourceType): boolean {
  return rt.group === "" && rt.plural === "pods";
}

/**
 * Pods start Pending whatever the creator wrote; nodes keep the status their kubelet registers
 * them with; custom resources start with no status.
 */
function resetStatusOnCreate(rt: ResourceType, obj: KubeObject): void {
  const o = obj as KubeObject & { status?: unknown };
  if (isPods(rt)) o.status = { phase: "Pending" };
  else if (rt.group === "" && rt.plural === "nodes") return;
  else delete o.status;
}

/**
 * Grace period of a delete. Only pods bound to a node are deleted gracefully (their kubelet
 * must confirm); unbound or finished pods and every other kind go at once.
 */
function gracefulPeriod(rt: ResourceType, obj: KubeObject, requested?: number): number {
  if (!(rt.group === "" && rt.plural === "pods")) return 0;
  const pod = obj as KubeObject & {
    spec?: { nodeName?: string; terminationGracePeriodSeconds?: number };
    status?: { phase?: string };
  };
  if (!pod.spec?.nodeName) return 0;
  if (pod.status?.phase === "Failed" || pod.status?.phase === "Succeeded") return 0;
  return requested ?? pod.spec.terminationGracePeriodSeconds ?? 30;
}

function fakeUid(n: number): string {
  const hex = n.toString(16).padStart(12, "0");
  return `00000000-0000-4000-8000-${hex}`;
}

function randomSuffix(): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  let s = "";
  for (let i = 0; i < 5; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
}

/** Field labels every kind offers in a field selector. */
const metadataFields = new Set(["metadata.name", "metadata.namespace"]);

/** Each field label maps to the path it reads. */
function sameNames(...fields: string[]): Record<string, string> {
  return Object.fromEntries(fields.map((f) => [f, f]));
}

/**
 * Further field labels the API server offers, by resource id, mapped to the path each reads (the
 * kinds' field-label conversions). Any other label is refused with 400 BadRequest; a custom
 * resource without selectableFields, a Lease or a ConfigMap offers only the metadata ones.
 */
const selectableFields: Record<string, Record<string, string>> = {
  pods: sameNames(
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
  ),
  events: {
    ...sameNames(
      "involvedObject.kind",
      "involvedObject.namespace",
      "involvedObject.name",
      "involvedObject.uid",
      "involvedObject.apiVersion",
      "involvedObject.resourceVersion",
      "involvedObject.fieldPath",
      "reason",
      "reportingComponent",
      "type",
    ),
    source: "source.component",
  },
  namespaces: sameNames("status.phase"),
};

/** The dryRun mark of a recorded write (absent for real writes). */
function dryRunOf(opts: WriteOptions | undefined): Pick<FakeAction, "dryRun"> {
  return opts?.dryRun ? { dryRun: true } : {};
}

/** The selectors of a list or watch as the recorded action carries them (absent when empty). */
/**
 * The request as RBAC sees it: a create names no object (unless it creates a subresource of
 * one), and a list or watch names one when its field selector is metadata.name=<name>.
 */
function accessNeedOf(action: FakeAction): AccessNeed {
  let name: string | undefined = action.name || undefined;
  if (action.verb === "create" && !action.subresource) name = undefined;
  if (action.verb === "list" || action.verb === "watch") {
    name = /^metadata\.name=([^,]+)$/.exec(action.fieldSelector ?? "")?.[1];
  }
  return {
    verb: action.verb,
    group: action.resource.group,
    resource: action.resource.plural,
    ...(action.subresource ? { subresource: action.subresource } : {}),
    namespace: action.resource.namespaced ? action.namespace : "",
    ...(name ? { name } : {}),
  };
}

function sentSelectors(
  labels: LabelSelector | undefined,
  fields: string | undefined,
): Pick<FakeAction, "labelSelector" | "fieldSelector"> {
  const labelText = labelSelectorString(labels);
  return {
    ...(labelText ? { labelSelector: labelText } : {}),
    ...(fields ? { fieldSelector: fields } : {}),
  };
}
