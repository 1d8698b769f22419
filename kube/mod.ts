/**
 * The controller runtime a reconciler is written against: controller-runtime's and client-go's
 * concepts over plain-JSON objects. A reconciler implements one method,
 * `reconcile(req, signal): Promise<Result | void>`; a thrown error requeues the key with
 * backoff, the result only says when to look again, and the `AbortSignal` travels where Go
 * passes a `context.Context`.
 *
 * What lives here, by concern:
 *
 * - objects and resources: {@link KubeObject}, {@link ResourceType} / {@link resourceType}, the
 *   built-in kinds ({@link Pods}, {@link Pod}, …);
 * - the client: {@link Client} (cached reads, API writes from a {@link Manager}), its errors
 *   ({@link isNotFound}, {@link isConflict}, …, which look through causes, so an error wrapped by
 *   {@link wrapError} keeps its class);
 * - writes: {@link patchObject} / {@link patchStatus} (merge-from patches, optionally with an
 *   optimistic lock; a mutation that changes nothing sends nothing) and {@link jsonEqual} for
 *   drift checks;
 * - controllerutil: finalizers ({@link addFinalizer}, {@link removeFinalizer},
 *   {@link containsFinalizer}), owner references ({@link setControllerReference},
 *   {@link isControlledBy}) and {@link ignoreNotFound};
 * - wiring: {@link controllerManagedBy}, handlers, predicates, the {@link Manager} and its
 *   cache scope ({@link byObject}); {@link LOW_PRIORITY} for a result's priority;
 * - Events ({@link EventRecorder}) and time ({@link Clock}, {@link sleep}, {@link rfc3339}).
 *
 * Test doubles (an in-memory API server, a fake clock, waits) are not part of this surface:
 * they live in `kube/testing/mod.ts`.
 *
 * @example A reconciler that keeps a finalizer on its object
 * ```ts
 * import {
 *   addFinalizer,
 *   type Client,
 *   ignoreNotFound,
 *   patchObject,
 *   type Reconciler,
 *   type Request,
 *   type Result,
 *   resourceType,
 * } from "./mod.ts";
 *
 * const Widgets = resourceType({
 *   group: "example.com",
 *   version: "v1",
 *   kind: "Widget",
 *   plural: "widgets",
 *   namespaced: true,
 *   statusSubresource: true,
 * });
 *
 * class WidgetReconciler implements Reconciler {
 *   constructor(readonly client: Client) {}
 *
 *   async reconcile(req: Request, signal: AbortSignal): Promise<Result> {
 *     const w = await this.client.get(Widgets, req.namespace, req.name, { signal })
 *       .catch(ignoreNotFound);
 *     if (!w) return {};
 *     // The lock turns a concurrent finalizer edit into a Conflict (and a retry), not a loss.
 *     await patchObject(this.client, Widgets, w, (o) => addFinalizer(o, "example.com/cleanup"), {
 *       optimisticLock: true,
 *       signal,
 *     });
 *     return {};
 *   }
 * }
 * ```
 *
 * @module
 */

// Objects and resources.
export type {
  KubeObject,
  ListMeta,
  ObjectKey,
  ObjectList,
  ObjectMeta,
  OwnerReference,
  Status,
} from "./object.ts";
export { controllerOf, deepCopy, keyString, objectKey, parseKey } from "./object.ts";
export type { ResourceType } from "./resource.ts";
export { apiVersionOf, resourceType } from "./resource.ts";
export type {
  Affinity,
  Binding,
  ConfigMap,
  Container,
  ContainerState,
  ContainerStatus,
  CoreEvent,
  EnvFromSource,
  EnvVar,
  Lease,
  LeaseSpec,
  Namespace,
  Node,
  NodeAffinity,
  NodeCondition,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  NodeSpec,
  NodeStatus,
  ObjectReference,
  Pod,
  PodCondition,
  PodSpec,
  PodStatus,
  ResourceRequirements,
  ServiceAccount,
  Taint,
  Toleration,
} from "./core.ts";
export { ConfigMaps, Events, Leases, Namespaces, Nodes, Pods, ServiceAccounts } from "./core.ts";

// The client and its errors.
export type {
  Client,
  DeleteOptions,
  GetOptions,
  JsonPatchOp,
  LabelSelector,
  ListOptions,
  PatchBody,
  PatchOptions,
  PatchType,
  Reader,
  Watcher,
  WatchEvent,
  WatchEventType,
  WatchOptions,
  WriteOptions,
  Writer,
} from "./client.ts";
export { ApiClient } from "./api_client.ts";
export type { RequestSpec, RestConfig } from "./transport.ts";
export { loadRestConfig, Transport } from "./transport.ts";
export type { ErrorTarget, StatusReason } from "./errors.ts";
export {
  ApiError,
  apiErrorOf,
  errorMessage,
  errorText,
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isInvalid,
  isNotFound,
  newApiError,
  wrapError,
} from "./errors.ts";

// Writes.
export type { LockedStatusUpdate, MergePatchOptions } from "./client_patch.ts";
export { patchAnnotations, patchObject, patchStatus, updateStatusLocked } from "./client_patch.ts";
export { jsonEqual } from "./patch.ts";

// controllerutil.
export {
  addFinalizer,
  AlreadyOwnedError,
  containsFinalizer,
  ignoreNotFound,
  isControlledBy,
  removeFinalizer,
  setControllerReference,
  setOwnerReference,
} from "./controllerutil.ts";

// The reconcile contract.
export type { Reconciler, Request, Result } from "./reconcile.ts";
export { isTerminalError, TerminalError } from "./reconcile.ts";

// Wiring: builder, handlers, predicates, manager.
export type { RateLimiter } from "./rate_limiter.ts";
export type {
  BuilderControllerOptions,
  BuilderWatchOptions,
  ControllerHost,
  OwnsOptions,
} from "./builder.ts";
export type { Runnable } from "./runnable.ts";
export { Builder, controllerManagedBy } from "./builder.ts";
export type { Controller } from "./controller.ts";
export type { EventHandler, Informer } from "./source.ts";
export type { Handler, OwnerOptions, OwnerType } from "./handler.ts";
export { enqueueForObject, enqueueForOwner, enqueueFromMap } from "./handler.ts";
export type { CompletePredicate, Predicate } from "./predicates.ts";
export {
  and,
  annotationChanged,
  funcs,
  generationChanged,
  labelChanged,
  newPredicateFuncs,
  not,
  or,
  resourceVersionChanged,
} from "./predicates.ts";
export type { ManagerOptions, ManagerOutcome } from "./manager.ts";
export { Manager } from "./manager.ts";
export type { ByObject, ObjectScope } from "./cache.ts";
export { byObject } from "./cache.ts";
export { LOW_PRIORITY } from "./priority_queue.ts";
export type { IndexFunc } from "./store.ts";
export { isValidLabelValue } from "./selector.ts";
export type { Checker } from "./servers.ts";
export { ping } from "./servers.ts";

// Events and time.
export type { EventRecorder, EventSubject, EventType, RecorderOptions } from "./events.ts";
export { Recorder } from "./events.ts";
export type { Clock, TimerId } from "./clock.ts";
export { realClock, sleep } from "./clock.ts";
export { parseRfc3339, rfc3339, rfc3339Micro, rfc3339Nano } from "./time.ts";
