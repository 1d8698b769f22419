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
} from "./client.ts";
import { ApiError, type ErrorTarget } from "./errors.ts";
import type { KubeObject, ObjectList, Status } from "./object.ts";
import { apiVersionOf as apiVersion, resourceId, type ResourceType } from "./resource.ts";
import { fieldSelectorString, labelSelectorString } from "./selector.ts";
import type { RequestSpec, Transport } from "./transport.ts";

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
};

/** The REST path of a resource collection or object. */
export function resourcePath(
  rt: ResourceType,
  namespace: string | undefined,
  name?: string,
  subresource?: string,
): string {
  let p = rt.group ? `/apis/${rt.group}/${rt.version}` : `/api/${rt.version}`;
  if (rt.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
  p += `/${rt.plural}`;
  if (name !== undefined) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}

function isStatus(v: unknown): v is Status {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "Status";
}

/**
 * The Client against a real API server. Objects travel as plain JSON; errors come back as
 * ApiError with the reason classified and the object named.
 */
export class ApiClient implements Client {
  /** Requests go through transport; writes are recorded under fieldManager in managedFields. */
  constructor(readonly transport: Transport, readonly fieldManager = "cocoon-operator") {}

  async #call<R>(spec: RequestSpec, target: ErrorTarget): Promise<R> {
    const res = await this.transport.fetch(spec);
    const text = await res.text();
    let body: unknown = undefined;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
    }
    if (!res.ok) {
      throw ApiError.fromStatus(
        res.status,
        isStatus(body) ? body : { kind: "Status", message: text.slice(0, 500) || res.statusText },
        target,
      );
    }
    return body as R;
  }

  #target(rt: ResourceType, namespace?: string, name?: string): ErrorTarget {
    return { resource: resourceId(rt), namespace: rt.namespaced ? namespace : undefined, name };
  }

  get<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts?: GetOptions,
  ): Promise<T> {
    return this.#call<T>(
      { method: "GET", path: resourcePath(rt, namespace, name), signal: opts?.signal },
      this.#target(rt, namespace, name),
    );
  }

  list<T extends KubeObject>(rt: ResourceType<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    const fields = [opts.fieldSelector, fieldSelectorString(opts.matchingFields)]
      .filter(Boolean).join(",");
    return this.#call<ObjectList<T>>({
      method: "GET",
      path: resourcePath(rt, opts.namespace),
      query: {
        labelSelector: labelSelectorString(opts.labelSelector),
        fieldSelector: fields,
        resourceVersion: opts.resourceVersion,
        limit: opts.limit ? String(opts.limit) : undefined,
        continue: opts.continue,
        shardSelector: opts.shardSelector,
      },
      signal: opts.signal,
    }, this.#target(rt, opts.namespace));
  }

  #writeQuery(opts?: WriteOptions): Record<string, string | undefined> {
    return {
      fieldManager: opts?.fieldManager ?? this.fieldManager,
      dryRun: opts?.dryRun ? "All" : undefined,
    };
  }

  create<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    const ns = obj.metadata.namespace;
    return this.#call<T>({
      method: "POST",
      path: resourcePath(rt, ns),
      query: this.#writeQuery(opts),
      body: { ...obj, apiVersion: apiVersion(rt), kind: rt.kind },
      signal: opts?.signal,
    }, this.#target(rt, ns, obj.metadata.name));
  }

  update<T extends KubeObject>(rt: ResourceType<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.#put(rt, obj, undefined, opts);
  }

  updateStatus<T extends KubeObject>(
    rt: ResourceType<T>,
    obj: T,
    opts?: WriteOptions,
  ): Promise<T> {
    return this.#put(rt, obj, "status", opts);
  }

  #put<T extends KubeObject>(
    rt: ResourceType<T>,
    obj: T,
    subresource: string | undefined,
    opts?: WriteOptions,
  ): Promise<T> {
    const { namespace, name } = obj.metadata;
    return this.#call<T>({
      method: "PUT",
      path: resourcePath(rt, namespace, name ?? "", subresource),
      query: this.#writeQuery(opts),
      body: { ...obj, apiVersion: apiVersion(rt), kind: rt.kind },
      signal: opts?.signal,
    }, this.#target(rt, namespace, name));
  }

  patch<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    type: PatchType,
    patch: PatchBody,
    opts?: PatchOptions,
  ): Promise<T> {
    return this.#call<T>({
      method: "PATCH",
      path: resourcePath(rt, namespace, name, opts?.subresource),
      query: this.#writeQuery(opts),
      body: patch,
      contentType: PATCH_CONTENT_TYPES[type],
      signal: opts?.signal,
    }, this.#target(rt, namespace, name));
  }

  createSubresource(
    rt: ResourceType,
    namespace: string,
    name: string,
    subresource: string,
    body: KubeObject,
    opts?: WriteOptions,
  ): Promise<unknown> {
    return this.#call<unknown>({
      method: "POST",
      path: resourcePath(rt, namespace, name, subresource),
      query: this.#writeQuery(opts),
      body,
      signal: opts?.signal,
    }, this.#target(rt, namespace, name));
  }

  async delete<T extends KubeObject>(
    rt: ResourceType<T>,
    namespace: string,
    name: string,
    opts: DeleteOptions = {},
  ): Promise<T | undefined> {
    const body = {
      apiVersion: "v1",
      kind: "DeleteOptions",
      ...(opts.preconditions ? { preconditions: opts.preconditions } : {}),
      ...(opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
      ...(opts.gracePeriodSeconds !== undefined
        ? { gracePeriodSeconds: opts.gracePeriodSeconds }
        : {}),
    };
    const res = await this.#call<T | Status>({
      method: "DELETE",
      path: resourcePath(rt, namespace, name),
      body,
      signal: opts.signal,
    }, this.#target(rt, namespace, name));
    if (!res || isStatus(res)) return undefined;
    // The server answers with the object both when it is gone and when it is only marked;
    // it is still there when a finalizer or a grace period holds it.
    const m = res.metadata;
    const held = !!m.deletionTimestamp &&
      ((m.finalizers?.length ?? 0) > 0 || (m.deletionGracePeriodSeconds ?? 0) > 0);
    return held ? res : undefined;
  }

  watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncIterable<WatchEvent<T>> {
    return this.#watch(rt, opts);
  }

  async *#watch<T extends KubeObject>(
    rt: ResourceType<T>,
    opts: WatchOptions,
  ): AsyncGenerator<WatchEvent<T>> {
    const target = this.#target(rt, opts.namespace);
    const res = await this.transport.fetch({
      method: "GET",
      path: resourcePath(rt, opts.namespace),
      query: {
        watch: "1",
        labelSelector: labelSelectorString(opts.labelSelector),
        fieldSelector: opts.fieldSelector,
        resourceVersion: opts.resourceVersion,
        allowWatchBookmarks: opts.allowWatchBookmarks ? "true" : undefined,
        sendInitialEvents: opts.sendInitialEvents ? "true" : undefined,
        resourceVersionMatch: opts.resourceVersionMatch,
        timeoutSeconds: opts.timeoutSeconds ? String(opts.timeoutSeconds) : undefined,
        shardSelector: opts.shardSelector,
      },
      signal: opts.signal,
      stream: true,
    });
    if (!res.ok) {
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      throw ApiError.fromStatus(
        res.status,
        isStatus(body) ? body : { kind: "Status", message: text.slice(0, 500) },
        target,
      );
    }
    opts.onOpen?.();
    if (!res.body) return;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    // Deno reaches the body through fetch's abort hook only while the request object lives; a
    // long watch's request can be garbage collected first, and the read would then go on until
    // the server ends the stream. Cancelling the reader ends a pending read in any case.
    const cancel = () => void reader.cancel().catch(() => {});
    opts.signal?.addEventListener("abort", cancel, { once: true });
    if (opts.signal?.aborted) cancel();
    let buffered = "";
    try {
      while (true) {
        let chunk: ReadableStreamReadResult<string>;
        try {
          chunk = await reader.read();
        } catch (err) {
          // A dropped connection or an abort ends the stream; the informer decides what next.
          if (opts.signal?.aborted) return;
          throw err;
        }
        if (chunk.done) break;
        buffered += chunk.value;
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line) yield JSON.parse(line) as WatchEvent<T>;
        }
      }
      // An abort can cut the stream mid-event: what is left is not an event.
      if (opts.signal?.aborted) return;
      if (buffered.trim()) yield JSON.parse(buffered) as WatchEvent<T>;
    } finally {
      opts.signal?.removeEventListener("abort", cancel);
      await reader.cancel().catch(() => {});
    }
  }
}
