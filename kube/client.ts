/**
 * The client contract (controller-runtime's client.Reader / client.Writer plus client-go's
 * watch): the API client, the informer cache (reads) and the fake all implement it, so a
 * reconciler never knows which one it holds.
 *
 * @module
 */
import type { KubeObject, ObjectList, Status } from "./object.ts";
import type { ResourceType } from "./resource.ts";

/** Label selector: "a=b,c!=d,e in (x,y),!f" or an equality map. */
export type LabelSelector = string | Record<string, string>;

/** Options of Reader.list. */
export interface ListOptions {
  /** Namespace to list in; omitted = all namespaces (or cluster scope). */
  namespace?: string;
  /** Only objects whose labels match. */
  labelSelector?: LabelSelector;
  /**
   * Exact-match fields ("metadata.name", "spec.nodeName", or a registered index such as
   * "spec.podRef.name"). The API client sends them as a field selector; the cached reader
   * answers them from its indexes.
   */
  matchingFields?: Record<string, string>;
  /** Raw field selector string; API client only. */
  fieldSelector?: string;
  /**
   * `shardSelector` (Kubernetes 1.36, KEP-5866): text from formatShardSelector. A server with
   * the ShardedListAndWatch gate filters and echoes it in metadata.shardInfo; others ignore it.
   * API client only (the fake records it and ignores it, as 1.35 does).
   */
  shardSelector?: string;
  /** Consistency of the list ("0" = any cached version); API client only. */
  resourceVersion?: string;
  /** Page size; the answer carries a continue token when more remain. API client only. */
  limit?: number;
  /** Token from the previous page. API client only. */
  continue?: string;
  /**
   * Readers that hold objects (the informer cache, the fake API) return their own copies
   * instead of deep copies, as controller-runtime's UnsafeDisableDeepCopy: for read-only scans of
   * many objects on hot paths. The caller must not mutate what it gets.
   */
  unsafeDisableDeepCopy?: boolean;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** Options of Reader.get. */
export interface GetOptions {
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** Options of create, update and updateStatus (and the base of PatchOptions). */
export interface WriteOptions {
  /** Server-side dry run ("All"). */
  dryRun?: boolean;
  /** Name recorded in managedFields (default: the client's, "cocoon-operator"). */
  fieldManager?: string;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** Options of Writer.delete (metav1.DeleteOptions). */
export interface DeleteOptions {
  /** Delete only if the object still has this uid / resourceVersion (else Conflict). */
  preconditions?: { uid?: string; resourceVersion?: string };
  /** What happens to dependents (only with a garbage collector; none runs in tests). */
  propagationPolicy?: "Foreground" | "Background" | "Orphan";
  /** Seconds a pod gets to stop; 0 = at once. */
  gracePeriodSeconds?: number;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** "merge" = RFC 7386 JSON merge patch, "json" = RFC 6902 JSON patch. */
export type PatchType = "merge" | "json";

/** One RFC 6902 operation. */
export interface JsonPatchOp {
  /** The operation. */
  op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  /** JSON pointer of the target ("/metadata/labels/app"). */
  path: string;
  /** Value for add, replace and test. */
  value?: unknown;
  /** Source pointer for move and copy. */
  from?: string;
}

/** A merge patch (an object) or a JSON patch (a list of operations), per PatchType. */
export type PatchBody = Record<string, unknown> | JsonPatchOp[];

/** Options of Writer.patch. */
export interface PatchOptions extends WriteOptions {
  /** "status" patches the status subresource. */
  subresource?: "status";
}

/** Options of Watcher.watch. */
export interface WatchOptions {
  /** Namespace to watch; omitted = all namespaces. */
  namespace?: string;
  /** Only objects whose labels match (objects leaving the filter arrive as DELETED). */
  labelSelector?: LabelSelector;
  /** Raw field selector string. */
  fieldSelector?: string;
  /**
   * `shardSelector` as for lists. Watch events carry no shardInfo, and 1.36.3 does not filter
   * watches served from etcd, so a caller must filter the events itself.
   */
  shardSelector?: string;
  /** Start after this resourceVersion (from a list); required for gap-free watches. */
  resourceVersion?: string;
  /** Ask for BOOKMARK events, so a resumed watch starts from a recent version. */
  allowWatchBookmarks?: boolean;
  /** Server-side timeout; the stream ends cleanly after it. */
  timeoutSeconds?: number;
  /**
   * Watch-list: the stream first sends the current state as ADDED events, then a BOOKMARK
   * annotated `k8s.io/initial-events-end: "true"`, then changes (instead of a LIST before the
   * watch). Needs resourceVersionMatch "NotOlderThan"; a server without the feature refuses it.
   */
  sendInitialEvents?: boolean;
  /** How resourceVersion is read: "NotOlderThan" (with sendInitialEvents) or "Exact". */
  resourceVersionMatch?: "NotOlderThan" | "Exact";
  /** Called once the server accepted the watch (its answer's headers arrived). */
  onOpen?: () => void;
  /** Ends the stream. */
  signal?: AbortSignal;
}

/** The annotation of the BOOKMARK that closes a watch-list stream's initial state. */
export const INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end";

/** The event types a watch stream carries. */
export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/**
 * One event of a watch stream: an object change, a BOOKMARK carrying only a resourceVersion,
 * or an ERROR carrying a metav1.Status (410 Gone when the resourceVersion was compacted).
 */
export type WatchEvent<T extends KubeObject> =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; object: T }
  | { type: "BOOKMARK"; object: KubeObject }
  | { type: "ERROR"; object: Status };

/** Reads objects. Implemented by the API client, the fake and the informer cache. */
export interface Reader {
  /** Throws ApiError NotFound when absent. */
  get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T>;
  /** Lists objects of rt (one page when opts.limit is set; the cache always answers in full). */
  list<T extends KubeObject>(rt: ResourceType<T>, opts?: ListOptions): Promise<ObjectList<T>>;
}

/** Writes objects. Every method returns the object as the server stored it. */
export interface Writer {
  /** Creates obj; AlreadyExists when the name is taken. Status is ignored. */
  create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
  /** Full update; Conflict if metadata.resourceVersion is stale. Status is ignored. */
  update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
  /** Update of the status subresource; everything but status is ignored. */
  updateStatus<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
  /**
   * Patches the named object (or its status with `subresource: "status"`). A merge patch that
   * carries metadata.resourceVersion fails with Conflict when the object moved on; prefer
   * patchObject / patchStatus, which compute the body.
   */
  patch<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    type: PatchType,
    patch: PatchBody,
    opts?: PatchOptions,
  ): Promise<T>;
  /**
   * Deletes; objects with finalizers are only marked (deletionTimestamp set) and returned.
   * Returns undefined when the object is gone right away.
   */
  delete<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: DeleteOptions,
  ): Promise<T | undefined>;
  /**
   * Creates a subresource of an existing object (POST .../<name>/<subresource>), such as a pod's
   * `binding`, which is the only way to set spec.nodeName once the pod exists. Returns the
   * server's answer as sent (for a binding, a Status).
   */
  createSubresource(
    rt: ResourceType,
    namespace: string,
    name: string,
    subresource: string,
    body: KubeObject,
    opts?: WriteOptions,
  ): Promise<unknown>;
}

/** Streams changes. */
export interface Watcher {
  /**
   * Opens a watch. The iterator ends when the server closes the stream or the signal aborts;
   * a 410 Gone arrives as an ERROR event with code 410 (or a thrown ApiError Gone).
   */
  watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>>;
}

/** The full client: what the API client and the fake both implement. */
export interface Client extends Reader, Writer, Watcher {}
