/**
 * core/v1 Event recording in the manner of client-go's tools/record: reconcilers call event()
 * and move on; a background writer correlates and sends. Correlation ports client-go's
 * EventCorrelator: identical repeats become a count/lastTimestamp patch on one Event, ten
 * different messages for the same object+reason within ten minutes collapse into one
 * "(combined from similar events)" Event, and a per-object token bucket (burst 25, one token
 * per 5 minutes) drops floods.
 */
import { getLogger } from "@logtape/logtape";
import type { Client } from "./client.ts";
import { type Clock, realClock, sleep, type TimerId } from "./clock.ts";
import { type CoreEvent, Events, type ObjectReference } from "./core.ts";
import { ApiError, errorText, isAlreadyExists, isNotFound } from "./errors.ts";
import type { KubeObject } from "./object.ts";
import { rfc3339 } from "./time.ts";
import { apiVersionOf, type ResourceType } from "./resource.ts";

const log = getLogger(["cocoon-operator", "events"]);

/** The two core/v1 Event types. */
export type EventType = "Normal" | "Warning";

/**
 * The object an Event is about. A plain object must carry apiVersion and kind (objects from
 * get/watch do); otherwise pair it with its ResourceType.
 */
export type EventSubject = KubeObject | { object: KubeObject; resource: ResourceType };

/** What reconcilers hold: fire-and-forget Event recording that never throws or blocks. */
export interface EventRecorder {
  /** Records an Event about subject; reason is CamelCase, message is free text. */
  event(subject: EventSubject, type: EventType, reason: string, message: string): void;
  /** event() with a Go-style format string (%s %v %d %q %t %%). */
  eventf(
    subject: EventSubject,
    type: EventType,
    reason: string,
    format: string,
    ...args: unknown[]
  ): void;
}

/** Knobs of the correlator; the defaults are client-go's. */
export interface CorrelatorOptions {
  /** Entries kept per cache (4096). */
  lruSize?: number;
  /** Distinct messages per object+reason before they are combined (10). */
  maxSimilar?: number;
  /** Window for counting similar events (10 min). */
  similarWindowMs?: number;
  /** Spam filter bucket size per source+object (25). */
  burst?: number;
  /** Spam filter refill rate (1 per 300 s). */
  refillPerSecond?: number;
}

export interface RecorderOptions {
  /** Writes the Events; only create and patch are used. */
  client: Pick<Client, "create" | "patch">;
  /** source.component and reportingComponent. */
  component: string;
  /** source.host and reportingInstance; the Go operator leaves it empty. */
  host?: string;
  clock?: Clock;
  /** Events waiting to be written beyond which new ones are dropped (client-go: 1000). */
  queueSize?: number;
  /** Attempts per Event on transport errors (12). */
  maxTries?: number;
  /** Pause between attempts (10 s; the first pause is a random fraction of it). */
  retryDelayMs?: number;
  random?: () => number;
  correlator?: CorrelatorOptions;
}

/** An Event that could not be attributed (no kind/apiVersion). */
export class EventSubjectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EventSubjectError";
  }
}

/**
 * Records core/v1 Events through a bounded queue and one background writer. event() is
 * synchronous and cheap; call flush() to wait for what is queued (tests) and close() on
 * shutdown to drain and stop.
 */
export class Recorder implements EventRecorder {
  readonly #client: Pick<Client, "create" | "patch">;
  readonly #clock: Clock;
  readonly #source: { component: string; host?: string };
  readonly #queueSize: number;
  readonly #maxTries: number;
  readonly #retryDelayMs: number;
  readonly #random: () => number;
  readonly #correlator: EventCorrelator;
  readonly #queue: CoreEvent[] = [];
  #writer?: Promise<void>;
  #closed = false;
  /** Aborts retry pauses at close(); pending Events then get a single attempt each. */
  readonly #stop = new AbortController();
  /** Aborted when close()'s timeout passes: in-flight and queued writes are given up. */
  readonly #abandon = new AbortController();
  #lastMs = 0;
  #seq = 0;
  /** Events dropped because the queue was full (for tests and debugging). */
  dropped = 0;

  constructor(opts: RecorderOptions) {
    this.#client = opts.client;
    this.#clock = opts.clock ?? realClock;
    this.#source = { component: opts.component, ...(opts.host ? { host: opts.host } : {}) };
    this.#queueSize = opts.queueSize ?? 1000;
    this.#maxTries = opts.maxTries ?? 12;
    this.#retryDelayMs = opts.retryDelayMs ?? 10_000;
    this.#random = opts.random ?? Math.random;
    this.#correlator = new EventCorrelator(this.#clock, opts.correlator);
  }

  event(subject: EventSubject, type: EventType, reason: string, message: string): void {
    try {
      this.#enqueue(subject, type, reason, message);
    } catch (err) {
      // Recording is best effort; a reconcile must never fail because of an Event.
      log.error("unable to record event: {error}", { error: errorText(err), reason, message });
    }
  }

  eventf(
    subject: EventSubject,
    type: EventType,
    reason: string,
    format: string,
    ...args: unknown[]
  ): void {
    let message: string;
    try {
      message = sprintf(format, args);
    } catch {
      message = format;
    }
    this.event(subject, type, reason, message);
  }

  /** Resolves once every Event queued so far has been written (or given up on). */
  async flush(): Promise<void> {
    while (this.#writer) await this.#writer;
  }

  /**
   * Stops accepting Events, writes what is queued (no retry pauses), and resolves. With
   * timeoutMs, whatever is still unwritten after that long is dropped, so an API server that
   * stopped answering cannot hold up shutdown (controller-runtime bounds it the same way).
   */
  async close(timeoutMs?: number): Promise<void> {
    this.#closed = true;
    this.#stop.abort();
    let timer: TimerId | undefined;
    if (timeoutMs !== undefined && this.#writer) {
      timer = this.#clock.setTimeout(
        () => this.#abandon.abort(new Error("event recorder shutdown timed out")),
        timeoutMs,
      );
    }
    try {
      await this.flush();
    } finally {
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    }
  }

  #enqueue(subject: EventSubject, type: EventType, reason: string, message: string): void {
    if (this.#closed) {
      log.warn("event recorder is closed, dropped event {reason}", { reason, message });
      return;
    }
    if (type !== "Normal" && type !== "Warning") {
      throw new EventSubjectError(`unsupported event type ${JSON.stringify(type)}`);
    }
    const ref = objectReference(subject);
    if (this.#queue.length >= this.#queueSize) {
      this.dropped++;
      log.error("unable to record event: too many queued events, dropped {reason} for {object}", {
        reason,
        object: `${ref.namespace ?? ""}/${ref.name}`,
        message,
      });
      return;
    }
    this.#queue.push(this.#makeEvent(ref, type, reason, message));
    this.#kick();
  }

  /** Starts the writer unless it runs; restarts it for Events queued while it was finishing. */
  #kick(): void {
    if (this.#writer) return;
    this.#writer = this.#drain().finally(() => {
      this.#writer = undefined;
      if (this.#queue.length > 0) this.#kick();
    });
  }

  #makeEvent(ref: ObjectReference, type: EventType, reason: string, message: string): CoreEvent {
    const ms = this.#clock.now();
    const t = rfc3339(ms);
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        name: eventName(ref.name ?? "", this.#uniqueNanos(ms)),
        namespace: ref.namespace || "default",
      },
      involvedObject: ref,
      reason,
      message,
      source: { ...this.#source },
      firstTimestamp: t,
      lastTimestamp: t,
      count: 1,
      type,
      reportingComponent: this.#source.component,
      reportingInstance: this.#source.host ?? "",
    };
  }

  /**
   * Unix nanoseconds for the name suffix. The clock has millisecond resolution, so Events made
   * within one millisecond get successive nanoseconds instead of colliding names.
   */
  #uniqueNanos(ms: number): bigint {
    if (ms === this.#lastMs) this.#seq++;
    else {
      this.#lastMs = ms;
      this.#seq = 0;
    }
    return BigInt(Math.trunc(ms)) * 1_000_000n + BigInt(this.#seq % 1_000_000);
  }

  async #drain(): Promise<void> {
    // Yield first so a burst of event() calls in one reconcile is queued before writing.
    await Promise.resolve();
    for (;;) {
      const ev = this.#queue.shift();
      if (!ev) return;
      try {
        await this.#recordToSink(ev);
      } catch (err) {
        log.error("unexpected error writing event: {error}", { error: errorText(err) });
      }
    }
  }

  /** client-go's recordToSink: correlate, then write with bounded retries. */
  async #recordToSink(ev: CoreEvent): Promise<void> {
    if (this.#abandon.signal.aborted) {
      log.error("unable to write event {reason} (recorder shutdown timed out)", eventProps(ev));
      return;
    }
    const result = this.#correlator.correlate(ev);
    if (result.skip) return;
    for (let tries = 1;; tries++) {
      if (await this.#write(result.event, result.patch)) return;
      if (tries >= this.#maxTries) {
        log.error("unable to write event {reason} (retry limit exceeded)", eventProps(ev));
        return;
      }
      if (this.#stop.signal.aborted) {
        log.error("unable to write event {reason} (recorder is shut down)", eventProps(ev));
        return;
      }
      const delay = tries === 1 ? this.#retryDelayMs * this.#random() : this.#retryDelayMs;
      await sleep(this.#clock, delay, this.#stop.signal);
    }
  }

  /**
   * Runs one API call that close()'s timeout can cut short, even for a client that ignores
   * its signal.
   */
  async #abandonable<T>(call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const signal = this.#abandon.signal;
    signal.throwIfAborted();
    let onAbort = () => {};
    const abandoned = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([call(signal), abandoned]);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** One attempt. True when done (written, or rejected by the server for good). */
  async #write(ev: CoreEvent, patch: Record<string, unknown> | undefined): Promise<boolean> {
    const ns = ev.metadata.namespace ?? "default";
    const name = ev.metadata.name ?? "";
    try {
      let written: CoreEvent | undefined;
      if ((ev.count ?? 1) > 1 && patch) {
        try {
          written = await this.#abandonable(
            (signal) => this.#client.patch(Events, ns, name, "merge", patch, { signal }),
          );
        } catch (err) {
          // The Event expired (API server TTL) or was deleted: create it afresh.
          if (!isNotFound(err)) throw err;
        }
      }
      if (!written) {
        const fresh: CoreEvent = { ...ev, metadata: { ...ev.metadata } };
        delete fresh.metadata.resourceVersion;
        written = await this.#abandonable((signal) =>
          this.#client.create(Events, fresh, { signal })
        );
      }
      this.#correlator.updateState(written);
      return true;
    } catch (err) {
      if (err instanceof ApiError) {
        // The server answered: retrying the same request would get the same answer.
        if (isAlreadyExists(err)) {
          log.debug("server rejected event {reason} (will not retry): {error}", {
            ...eventProps(ev),
            error: err.message,
          });
        } else {
          log.error("server rejected event {reason} (will not retry): {error}", {
            ...eventProps(ev),
            error: err.message,
          });
        }
        return true;
      }
      log.warn("unable to write event {reason} (may retry): {error}", {
        ...eventProps(ev),
        error: errorText(err),
      });
      return false;
    }
  }
}

/** Builds the involvedObject reference (client-go's ref.GetReference). */
export function objectReference(subject: EventSubject): ObjectReference {
  const { object, apiVersion, kind } = "resource" in subject && "object" in subject
    ? {
      object: subject.object,
      apiVersion: subject.object.apiVersion || apiVersionOf(subject.resource),
      kind: subject.object.kind || subject.resource.kind,
    }
    : { object: subject, apiVersion: subject.apiVersion, kind: subject.kind };
  if (!apiVersion || !kind) {
    throw new EventSubjectError(
      `object ${object.metadata.namespace ?? ""}/${object.metadata.name ?? ""} has no ` +
        "apiVersion/kind; pass { object, resource } to name its type",
    );
  }
  const ref: ObjectReference = { kind, apiVersion, name: object.metadata.name ?? "" };
  if (object.metadata.namespace) ref.namespace = object.metadata.namespace;
  if (object.metadata.uid) ref.uid = object.metadata.uid;
  if (object.metadata.resourceVersion) ref.resourceVersion = object.metadata.resourceVersion;
  return ref;
}

interface CorrelateResult {
  skip: boolean;
  event: CoreEvent;
  /** Merge patch for an Event already written (count > 1). */
  patch?: Record<string, unknown>;
}

interface EventLog {
  count: number;
  firstTimestamp?: string;
  name: string;
  resourceVersion?: string;
}

interface AggregateRecord {
  localKeys: Set<string>;
  lastMs: number;
}

interface Bucket {
  tokens: number;
  lastMs: number;
}

/**
 * client-go's EventCorrelator: aggregation of similar events, de-duplication of identical ones
 * into counts, and the per-object spam filter. Separate from the Recorder so it can be tested
 * on its own; single-threaded, so no locks.
 */
export class EventCorrelator {
  readonly #clock: Clock;
  readonly #maxSimilar: number;
  readonly #windowMs: number;
  readonly #burst: number;
  readonly #refillPerMs: number;
  readonly #aggregates: Lru<AggregateRecord>;
  readonly #logs: Lru<EventLog>;
  readonly #buckets: Lru<Bucket>;

  constructor(clock: Clock = realClock, opts: CorrelatorOptions = {}) {
    const size = opts.lruSize ?? 4096;
    this.#clock = clock;
    this.#maxSimilar = opts.maxSimilar ?? 10;
    this.#windowMs = opts.similarWindowMs ?? 600_000;
    this.#burst = opts.burst ?? 25;
    this.#refillPerMs = (opts.refillPerSecond ?? 1 / 300) / 1000;
    this.#aggregates = new Lru(size);
    this.#logs = new Lru(size);
    this.#buckets = new Lru(size);
  }

  /** Decides what to write for a new Event. */
  correlate(ev: CoreEvent): CorrelateResult {
    const { event: aggregated, key } = this.#aggregate(ev);
    const { event, patch } = this.#observe(aggregated, key);
    // As in client-go the spam check comes last, so a filtered Event still bumps the count
    // that the next written one carries.
    if (this.#filtered(event)) return { skip: true, event };
    return { skip: false, event, patch };
  }

  /** Remembers what the server stored (name, resourceVersion, count) for later patches. */
  updateState(ev: CoreEvent): void {
    this.#logs.set(eventKey(ev), {
      count: ev.count ?? 1,
      firstTimestamp: ev.firstTimestamp,
      name: ev.metadata.name ?? "",
      resourceVersion: ev.metadata.resourceVersion,
    });
  }

  #aggregate(ev: CoreEvent): { event: CoreEvent; key: string } {
    const now = this.#clock.now();
    const aggregateKey = aggregatorKey(ev);
    const localKey = ev.message ?? "";
    let record = this.#aggregates.get(aggregateKey);
    if (!record || now - record.lastMs > this.#windowMs) {
      record = { localKeys: new Set(), lastMs: now };
    }
    record.localKeys.add(localKey);
    record.lastMs = now;
    this.#aggregates.set(aggregateKey, record);
    if (record.localKeys.size < this.#maxSimilar) return { event: ev, key: eventKey(ev) };
    // Keep the set just under the limit so every further message is combined too.
    const first = record.localKeys.values().next();
    if (!first.done) record.localKeys.delete(first.value);
    const t = rfc3339(now);
    const combined: CoreEvent = {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        name: eventName(ev.involvedObject.name ?? "", BigInt(Math.trunc(now)) * 1_000_000n),
        namespace: ev.metadata.namespace,
      },
      count: 1,
      firstTimestamp: t,
      involvedObject: ev.involvedObject,
      lastTimestamp: t,
      message: `(combined from similar events): ${ev.message ?? ""}`,
      type: ev.type,
      reason: ev.reason,
      source: ev.source,
    };
    return { event: combined, key: aggregateKey };
  }

  #observe(
    ev: CoreEvent,
    key: string,
  ): { event: CoreEvent; patch?: Record<string, unknown> } {
    const last = this.#logs.get(key);
    const event: CoreEvent = { ...ev, metadata: { ...ev.metadata } };
    let patch: Record<string, unknown> | undefined;
    if (last && last.count > 0) {
      event.metadata.name = last.name;
      if (last.resourceVersion) event.metadata.resourceVersion = last.resourceVersion;
      else delete event.metadata.resourceVersion;
      event.firstTimestamp = last.firstTimestamp;
      event.count = last.count + 1;
      // What client-go's two-way strategic merge patch against a copy with those three fields
      // zeroed produces.
      patch = { count: event.count, lastTimestamp: event.lastTimestamp };
      if (event.message) patch.message = event.message;
    }
    this.#logs.set(key, {
      count: event.count ?? 1,
      firstTimestamp: event.firstTimestamp,
      name: event.metadata.name ?? "",
      resourceVersion: event.metadata.resourceVersion,
    });
    return { event, patch };
  }

  #filtered(ev: CoreEvent): boolean {
    const now = this.#clock.now();
    const key = spamKey(ev);
    const bucket = this.#buckets.get(key) ?? { tokens: this.#burst, lastMs: now };
    bucket.tokens = Math.min(
      this.#burst,
      bucket.tokens + (now - bucket.lastMs) * this.#refillPerMs,
    );
    bucket.lastMs = now;
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.#buckets.set(key, bucket);
    return !allowed;
  }
}

function refParts(ev: CoreEvent): string[] {
  const o = ev.involvedObject;
  return [
    ev.source?.component ?? "",
    ev.source?.host ?? "",
    o.kind ?? "",
    o.namespace ?? "",
    o.name ?? "",
  ];
}

/** Identity of identical Events (client-go's getEventKey). */
function eventKey(ev: CoreEvent): string {
  const o = ev.involvedObject;
  return [
    ...refParts(ev),
    o.fieldPath ?? "",
    o.uid ?? "",
    o.apiVersion ?? "",
    ev.type ?? "",
    ev.reason ?? "",
    ev.message ?? "",
  ].join("\u0000");
}

/** Per source+object+type bucket key (client-go's getSpamKey). */
function spamKey(ev: CoreEvent): string {
  const o = ev.involvedObject;
  return [...refParts(ev), o.uid ?? "", o.apiVersion ?? "", ev.type ?? ""].join("\u0000");
}

/** Similar-event key: everything but the message (EventAggregatorByReasonFunc). */
function aggregatorKey(ev: CoreEvent): string {
  const o = ev.involvedObject;
  return [
    ...refParts(ev),
    o.uid ?? "",
    o.apiVersion ?? "",
    ev.type ?? "",
    ev.reason ?? "",
    ev.reportingComponent ?? "",
    ev.reportingInstance ?? "",
  ].join("\u0000");
}

/** "<object name>.<unix nanos in hex>", or a UUID when that is not a valid object name. */
function eventName(refName: string, unixNanos: bigint): string {
  const name = `${refName}.${unixNanos.toString(16)}`;
  return isDnsSubdomain(name) ? name : crypto.randomUUID();
}

function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 &&
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s);
}

function eventProps(ev: CoreEvent): Record<string, unknown> {
  return {
    reason: ev.reason,
    type: ev.type,
    object: `${ev.involvedObject.namespace ?? ""}/${ev.involvedObject.name ?? ""}`,
    message: ev.message,
  };
}

/** A Map-backed LRU: reads refresh recency, inserts evict the least recently used. */
class Lru<V> {
  readonly #max: number;
  readonly #map = new Map<string, V>();

  constructor(max: number) {
    this.#max = max;
  }

  get(key: string): V | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }

  set(key: string, v: V): void {
    this.#map.delete(key);
    this.#map.set(key, v);
    if (this.#map.size > this.#max) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
  }
}

/**
 * A subset of Go's fmt verbs, enough for Event messages: %s %v %d %q %t and %%. Unknown verbs
 * print the argument as %v would.
 */
export function sprintf(format: string, args: unknown[]): string {
  let i = 0;
  const out = format.replace(/%([%svdqtfx])/g, (_m, verb: string) => {
    if (verb === "%") return "%";
    if (i >= args.length) return `%!${verb}(MISSING)`;
    const a = args[i++];
    switch (verb) {
      case "q":
        return JSON.stringify(String(a));
      case "d":
        return typeof a === "number" ? String(Math.trunc(a)) : String(a);
      case "x":
        return typeof a === "number" ? Math.trunc(a).toString(16) : String(a);
      default:
        return formatValue(a);
    }
  });
  return i < args.length ? `${out}%!(EXTRA ${args.slice(i).map(formatValue).join(", ")})` : out;
}

function formatValue(a: unknown): string {
  if (a instanceof Error) return a.message;
  if (a !== null && typeof a === "object") {
    try {
      return JSON.stringify(a);
    } catch {
      return String(a);
    }
  }
  return String(a);
}
