import type { KubeObject, ObjectList, Status } from "./object.ts";
import type { ResourceType } from "./resource.ts";

/** Label selector: "a=b,c!=d,e in (x,y),!f" or an equality map. */
export type LabelSelector = string | Record<string, string>;

export interface ListOptions {
  /** Namespace to list in; omitted = all namespaces (or cluster scope). */
  namespace?: string;
  labelSelector?: LabelSelector;
  /**
   * Exact-match fields ("metadata.name", "spec.nodeName", or a registered index such as
   * "spec.podRef.name"). The API client sends them as a field selector; the cached reader
   * answers them from its indexes.
   */
  matchingFields?: Record<string, string>;
  /** Raw field selector string; API client only. */
  fieldSelector?: string;
  resourceVersion?: string;
  limit?: number;
  continue?: string;
  /**
   * Readers that hold objects (the informer cache, the fake API) return their own copies
   * instead of deep copies, as controller-runtime's UnsafeDisableDeepCopy: for read-only scans of
   * many objects on hot paths. The caller must not mutate what it gets.
   */
  unsafeDisableDeepCopy?: boolean;
  signal?: AbortSignal;
}

export interface GetOptions {
  signal?: AbortSignal;
}

export interface WriteOptions {
  /** Server-side dry run ("All"). */
  dryRun?: boolean;
  fieldManager?: string;
  signal?: AbortSignal;
}

export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: "Foreground" | "Background" | "Orphan";
  gracePeriodSeconds?: number;
  signal?: AbortSignal;
}

/** "merge" = RFC 7386 JSON merge patch, "json" = RFC 6902 JSON patch. */
export type PatchType = "merge" | "json";

/** One RFC 6902 operation. */
export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  path: string;
  value?: unknown;
  from?: string;
}

export type PatchBody = Record<string, unknown> | JsonPatchOp[];

export interface PatchOptions extends WriteOptions {
  /** "status" patches the status subresource. */
  subresource?: "status";
}

export interface WatchOptions {
  namespace?: string;
  labelSelector?: LabelSelector;
  fieldSelector?: string;
  /** Start after this resourceVersion (from a list); required for gap-free watches. */
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
  /** Server-side timeout; the stream ends cleanly after it. */
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

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
  list<T extends KubeObject>(rt: ResourceType<T>, opts?: ListOptions): Promise<ObjectList<T>>;
}

/** Writes objects. Every method returns the object as the server stored it. */
export interface Writer {
  create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
  /** Full update; Conflict if metadata.resourceVersion is stale. Status is ignored. */
  update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
  /** Update of the status subresource; everything but status is ignored. */
  updateStatus<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T>;
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
