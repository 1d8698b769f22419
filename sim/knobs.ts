/**
 * Failure and timing knobs of the simulated VMs. A knob can be set for every pod (simulator
 * options or CLI flags), by a test hook that picks pods in-process, or on one pod with a
 * `sim.cocoonstack.io/*` annotation; the annotation wins over the hook, the hook over the
 * global setting. The keys live under `sim.cocoonstack.io/` so nothing in the cocoon contract
 * ever reads them.
 *
 * @module
 */
import type { Pod } from "../kube/core.ts";

/** "lifecycle" reports `lifecycle-state=failed`; "pod-failed" puts the pod in phase Failed. */
export type FailMode = "lifecycle" | "pod-failed";

/** Pod annotation: make the VM fail (FailMode). Applies at boot, or at once on a running VM. */
export const ANNOTATION_SIM_FAIL = "sim.cocoonstack.io/fail";
/** Pod annotation: the failure message (lifecycle-state-message / status message). */
export const ANNOTATION_SIM_FAIL_MESSAGE = "sim.cocoonstack.io/fail-message";
/** Pod annotation: boot (and wake) latency of this VM in milliseconds. */
export const ANNOTATION_SIM_BOOT_DELAY_MS = "sim.cocoonstack.io/boot-delay-ms";
/** Pod annotation: hibernate latency of this VM in milliseconds (a slow snapshot). */
export const ANNOTATION_SIM_HIBERNATE_DELAY_MS = "sim.cocoonstack.io/hibernate-delay-ms";
/** Pod annotation: "true" makes every registry push for this VM fail. */
export const ANNOTATION_SIM_PUSH_FAIL = "sim.cocoonstack.io/push-fail";

/**
 * Pod annotation: "silent" plays vk-cocoon as it is today (cocoonstack/vk-cocoon HEAD): no
 * lifecycle annotations at all, and a hibernation as save → push → remove, the VM id and ip
 * cleared only after the removal (`remove-delay-ms` after the push).
 */
export const ANNOTATION_SIM_LIFECYCLE = "sim.cocoonstack.io/lifecycle";
/** Pod annotation: in silent mode, how long the VM stays up after its `:hibernate` push (ms). */
export const ANNOTATION_SIM_REMOVE_DELAY_MS = "sim.cocoonstack.io/remove-delay-ms";

/** The knobs of one VM; absent fields fall back to the next source, then to the defaults. */
export interface Knobs {
  /** Write no lifecycle annotations and hibernate as save → push → remove (vk-cocoon HEAD). */
  silentLifecycle?: boolean;
  /** With silentLifecycle: the time between the `:hibernate` push and the VM's removal (ms). */
  removeDelayMs?: number;
  fail?: FailMode;
  failMessage?: string;
  bootDelayMs?: number;
  hibernateDelayMs?: number;
  pushFail?: boolean;
}

/** The message used when a failure knob gives none. */
export const DEFAULT_FAIL_MESSAGE = "simulated VM failure";

/** Parses a FailMode; undefined for anything else. */
export function parseFailMode(value: string | undefined): FailMode | undefined {
  return value === "lifecycle" || value === "pod-failed" ? value : undefined;
}

function parseDelay(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

/**
 * The knobs a pod's annotations set. Malformed values are ignored (and listed in `invalid` so
 * the caller can log them): a typo must not turn into a surprise failure.
 */
export function knobsFromAnnotations(pod: Pod): { knobs: Knobs; invalid: string[] } {
  const a = pod.metadata.annotations ?? {};
  const knobs: Knobs = {};
  const invalid: string[] = [];
  const fail = a[ANNOTATION_SIM_FAIL];
  if (fail !== undefined && fail !== "") {
    knobs.fail = parseFailMode(fail);
    if (!knobs.fail) invalid.push(`${ANNOTATION_SIM_FAIL}=${fail}`);
  }
  if (a[ANNOTATION_SIM_FAIL_MESSAGE]) knobs.failMessage = a[ANNOTATION_SIM_FAIL_MESSAGE];
  for (
    const [key, field] of [
      [ANNOTATION_SIM_BOOT_DELAY_MS, "bootDelayMs"],
      [ANNOTATION_SIM_HIBERNATE_DELAY_MS, "hibernateDelayMs"],
      [ANNOTATION_SIM_REMOVE_DELAY_MS, "removeDelayMs"],
    ] as const
  ) {
    if (a[key] === undefined) continue;
    const ms = parseDelay(a[key]);
    if (ms === undefined) invalid.push(`${key}=${a[key]}`);
    else knobs[field] = ms;
  }
  if (a[ANNOTATION_SIM_PUSH_FAIL] !== undefined) {
    knobs.pushFail = a[ANNOTATION_SIM_PUSH_FAIL] === "true";
  }
  const lifecycle = a[ANNOTATION_SIM_LIFECYCLE];
  if (lifecycle === "silent" || lifecycle === "annotated") {
    knobs.silentLifecycle = lifecycle === "silent";
  } else if (lifecycle !== undefined && lifecycle !== "") {
    invalid.push(`${ANNOTATION_SIM_LIFECYCLE}=${lifecycle}`);
  }
  return { knobs, invalid };
}

/** Layers knob sources, later ones winning field by field. */
export function mergeKnobs(...layers: (Knobs | undefined)[]): Knobs {
  const out: Knobs = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) {
      if (v !== undefined) (out as Record<string, unknown>)[k] = v;
    }
  }
  return out;
}
