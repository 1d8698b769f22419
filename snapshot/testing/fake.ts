/**
 * An in-memory Registry for reconciler tests: records every call, injects latency and faults per
 * operation, and tracks how many calls per VM name are in flight so a test can prove that work
 * on one VM is serialized.
 */

import type { Registry } from "../registry.ts";

/** The two registry operations, as recorded and as targeted by fault injection. */
export type FakeOp = "hasManifest" | "deleteManifest";

/** One recorded call, in arrival order. */
export interface FakeCall {
  op: FakeOp;
  name: string;
  reference: string;
}

/** Decides the fault for a call: return an error to throw it, or undefined to proceed. */
export type FaultFn = (call: FakeCall) => unknown;

/** Options of the fake. */
export interface FakeRegistryOptions {
  /**
   * Delay before each call completes: milliseconds, or a function returning a promise the call
   * awaits (use it to hold calls until a test releases them).
   */
  latency?: number | ((call: FakeCall) => Promise<void>);
}

interface Fault {
  op: FakeOp;
  name?: string;
  remaining: number; // Infinity for a standing fault
  error: unknown;
}

/** In-memory fake of Registry; see module doc. */
export class FakeRegistry implements Registry {
  /** Every call in arrival order (recorded before latency and faults apply). */
  readonly calls: FakeCall[] = [];

  readonly #tags = new Map<string, Map<string, string>>();
  readonly #faults: Fault[] = [];
  readonly #inFlight = new Map<string, number>();
  readonly #maxInFlight = new Map<string, number>();
  #maxTotal = 0;
  #total = 0;
  #latency: FakeRegistryOptions["latency"];

  constructor(opts: FakeRegistryOptions = {}) {
    this.#latency = opts.latency;
  }

  /** Sets (or clears) the latency applied to later calls. */
  setLatency(latency: FakeRegistryOptions["latency"]): void {
    this.#latency = latency;
  }

  /** Stores `<name>:<tag>` pointing at digest (a fresh fake digest when omitted). */
  put(name: string, tag: string, digest = fakeDigest(name, tag)): string {
    let tags = this.#tags.get(name);
    if (!tags) {
      tags = new Map();
      this.#tags.set(name, tags);
    }
    tags.set(tag, digest);
    return digest;
  }

  /** The tags stored for name, sorted. */
  tagsOf(name: string): string[] {
    return [...(this.#tags.get(name)?.keys() ?? [])].sort();
  }

  /** Whether `<name>:<tag>` is stored, without recording a call. */
  contains(name: string, tag: string): boolean {
    return this.#tags.get(name)?.has(tag) ?? false;
  }

  /**
   * Makes the next `times` calls of op (optionally only for VM name) throw error.
   * Use `times: Infinity` for a standing fault; clearFaults() removes all.
   */
  failNext(op: FakeOp, error: unknown, opts: { name?: string; times?: number } = {}): void {
    this.#faults.push({ op, name: opts.name, remaining: opts.times ?? 1, error });
  }

  /** Removes every injected fault. */
  clearFaults(): void {
    this.#faults.length = 0;
  }

  /** Calls recorded for op (and name, when given). */
  callsOf(op: FakeOp, name?: string): FakeCall[] {
    return this.calls.filter((c) => c.op === op && (name === undefined || c.name === name));
  }

  /** Calls currently in flight for name. */
  inFlight(name: string): number {
    return this.#inFlight.get(name) ?? 0;
  }

  /** Highest number of simultaneous in-flight calls ever seen for name. */
  maxInFlight(name: string): number {
    return this.#maxInFlight.get(name) ?? 0;
  }

  /** Highest number of simultaneous in-flight calls ever seen across all names. */
  maxInFlightTotal(): number {
    return this.#maxTotal;
  }

  hasManifest(name: string, reference: string, signal?: AbortSignal): Promise<boolean> {
    return this.#run({ op: "hasManifest", name, reference }, signal, () => {
      return this.contains(name, reference);
    });
  }

  deleteManifest(name: string, reference: string, signal?: AbortSignal): Promise<void> {
    return this.#run({ op: "deleteManifest", name, reference }, signal, () => {
      this.#tags.get(name)?.delete(reference);
    });
  }

  async #run<T>(call: FakeCall, signal: AbortSignal | undefined, body: () => T): Promise<T> {
    this.calls.push(call);
    this.#enter(call.name);
    try {
      signal?.throwIfAborted();
      await this.#delay(call, signal);
      signal?.throwIfAborted();
      const fault = this.#takeFault(call);
      if (fault !== undefined) throw fault;
      return body();
    } finally {
      this.#leave(call.name);
    }
  }

  #enter(name: string): void {
    const n = this.inFlight(name) + 1;
    this.#inFlight.set(name, n);
    this.#maxInFlight.set(name, Math.max(n, this.maxInFlight(name)));
    this.#total++;
    this.#maxTotal = Math.max(this.#maxTotal, this.#total);
  }

  #leave(name: string): void {
    const n = this.inFlight(name) - 1;
    if (n === 0) this.#inFlight.delete(name);
    else this.#inFlight.set(name, n);
    this.#total--;
  }

  #takeFault(call: FakeCall): unknown {
    const i = this.#faults.findIndex((f) =>
      f.op === call.op && (f.name === undefined || f.name === call.name)
    );
    if (i < 0) return undefined;
    const fault = this.#faults[i];
    fault.remaining--;
    if (fault.remaining <= 0) this.#faults.splice(i, 1);
    return fault.error;
  }

  async #delay(call: FakeCall, signal?: AbortSignal): Promise<void> {
    const latency = this.#latency;
    if (latency === undefined || latency === 0) return;
    if (typeof latency === "function") {
      await latency(call);
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, latency);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** A stable, digest-shaped placeholder for `<name>:<tag>` (not a real content hash). */
function fakeDigest(name: string, tag: string): string {
  let h = 0;
  for (const ch of `${name}:${tag}`) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return `sha256:${h.toString(16).padStart(64, "0")}`;
}
