/**
 * The pod statuses the simulated kubelet reports, as status-subresource merge patches. They
 * follow what vk-cocoon derives from its VM table (provider/cocoon/status.go) and what
 * virtual-kubelet writes when the provider fails:
 * - VM running: phase Running, Ready / ContainersReady / Initialized / PodScheduled True, one
 *   running status per container, the VM's IP as pod IP;
 * - VM gone (hibernated): phase Pending, no container statuses, no pod IP, not Ready;
 * - boot refused (lifecycle failure): phase Pending, reason ProviderFailed and the message;
 * - pod failed: phase Failed, containers terminated, not Ready.
 * Unlike vk-cocoon, which reports Ready only once its probe reaches the guest, a simulated VM
 * is Ready as soon as it boots. Condition timestamps move only when a condition changes.
 *
 * @module
 */
import type { Pod, PodCondition } from "../kube/core.ts";
import { rfc3339 } from "../kube/time.ts";

type Wanted = Pick<PodCondition, "type" | "status" | "reason" | "message">;

/**
 * The pod's conditions after setting `wanted` (others of those types are replaced, the rest
 * kept unless `only`): a condition keeps its lastTransitionTime when its status is unchanged.
 */
function conditionsWith(
  pod: Pod,
  wanted: Wanted[],
  now: number,
  only = false,
): PodCondition[] {
  const current = pod.status?.conditions ?? [];
  const types = new Set(wanted.map((w) => w.type));
  const kept = only ? [] : current.filter((c) => !types.has(c.type));
  const at = rfc3339(now);
  return [
    ...kept,
    ...wanted.map((w) => {
      const was = current.find((c) => c.type === w.type);
      const cond: PodCondition = {
        type: w.type,
        status: w.status,
        lastTransitionTime: was?.status === w.status && was.lastTransitionTime
          ? was.lastTransitionTime
          : at,
      };
      if (w.reason) cond.reason = w.reason;
      if (w.message) cond.message = w.message;
      return cond;
    }),
  ];
}

const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)$/;

function containerNames(pod: Pod): { name: string; image: string }[] {
  const containers = pod.spec?.containers ?? [];
  if (containers.length === 0) return [{ name: "agent", image: "" }];
  return containers.map((c) => ({ name: c.name, image: c.image ?? "" }));
}

/** Status of a pod whose VM runs at `ip` since `now`. */
export function runningStatus(pod: Pod, ip: string, now: number): Record<string, unknown> {
  const at = rfc3339(now);
  const startTime = (pod.status as { startTime?: string } | undefined)?.startTime ?? at;
  const podIP = IPV4.test(ip) ? ip : null;
  return {
    phase: "Running",
    reason: null,
    message: null,
    startTime,
    podIP,
    podIPs: podIP ? [{ ip: podIP }] : null,
    conditions: conditionsWith(
      pod,
      [
        { type: "PodScheduled", status: "True" },
        { type: "Initialized", status: "True" },
        { type: "ContainersReady", status: "True" },
        { type: "Ready", status: "True" },
      ],
      now,
      true,
    ),
    containerStatuses: containerNames(pod).map((c) => ({
      name: c.name,
      ready: true,
      started: true,
      restartCount: 0,
      image: c.image,
      imageID: "",
      state: { running: { startedAt: at } },
    })),
  };
}

/** Status of a pod whose VM was hibernated away: back to Pending with nothing running. */
export function vmGoneStatus(pod: Pod, now: number): Record<string, unknown> {
  return {
    phase: "Pending",
    reason: null,
    message: null,
    podIP: null,
    podIPs: null,
    conditions: conditionsWith(pod, [{ type: "PodScheduled", status: "True" }], now, true),
    containerStatuses: null,
  };
}

/** Status of a pod whose VM could not be brought up (virtual-kubelet's ProviderFailed). */
export function providerFailedStatus(
  pod: Pod,
  message: string,
  now: number,
): Record<string, unknown> {
  return {
    phase: "Pending",
    reason: "ProviderFailed",
    message,
    podIP: null,
    podIPs: null,
    conditions: conditionsWith(
      pod,
      [
        { type: "PodScheduled", status: "True" },
        { type: "Ready", status: "False", reason: "ProviderFailed", message },
      ],
      now,
      true,
    ),
    containerStatuses: null,
  };
}

/** Status of a pod whose VM died for good: phase Failed, containers terminated. */
export function podFailedStatus(pod: Pod, message: string, now: number): Record<string, unknown> {
  const at = rfc3339(now);
  return {
    phase: "Failed",
    reason: "Error",
    message,
    conditions: conditionsWith(pod, [
      { type: "PodScheduled", status: "True" },
      { type: "ContainersReady", status: "False", reason: "PodFailed" },
      { type: "Ready", status: "False", reason: "PodFailed" },
    ], now),
    containerStatuses: containerNames(pod).map((c) => ({
      name: c.name,
      ready: false,
      started: false,
      restartCount: 0,
      image: c.image,
      imageID: "",
      state: { terminated: { exitCode: 1, reason: "Error", message, finishedAt: at } },
    })),
  };
}
