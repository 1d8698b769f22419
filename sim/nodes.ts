/**
 * The simulator's virtual nodes: the Node objects vk-cocoon would register (pool label, CPU
 * class label, hostname, `type=virtual-kubelet`, the `virtual-kubelet.io/provider=cocoon`
 * NoSchedule taint, Ready, a pod capacity equal to the node's seats) and the scheduler's view of
 * them.
 *
 * A real API server taints every new node `node.kubernetes.io/not-ready:NoSchedule` until the
 * node lifecycle controller clears it; there is none on a test control plane, so the simulator
 * plays that controller for its own nodes and writes the taint list it wants right after
 * creating them.
 *
 * @module
 */
import type { Client } from "../kube/client.ts";
import { type Node, Nodes, type Taint } from "../kube/core.ts";
import { isAlreadyExists } from "../kube/errors.ts";
import { rfc3339 } from "../kube/time.ts";
import {
  DEFAULT_NODE_POOL,
  LABEL_NODE_POOL,
  LABEL_SNAPSHOT_COMPATIBILITY_CLASS,
  TOLERATION_KEY,
} from "../common/meta/keys.ts";
import type { NodeView } from "./placement.ts";

/** One virtual node of the simulator. */
export interface SimNode {
  name: string;
  /** `cocoonstack.io/pool` (default `default`). */
  pool?: string;
  /** `cocoonstack.io/snapshot-cpu-class`; no label when empty. */
  cpuClass?: string;
  /** How many pods the node admits (status capacity / allocatable `pods`). */
  seats: number;
  /** Extra labels (tests of affinity on custom labels). */
  labels?: Record<string, string>;
}

/** Label marking nodes this simulator registered (its node watch selects on it). */
export const LABEL_SIMULATED_NODE = "sim.cocoonstack.io/node";
/** Label value vk-cocoon's virtual-kubelet sets on `type`. */
const NODE_TYPE_VIRTUAL_KUBELET = "virtual-kubelet";
/** The taint vk-cocoon puts on its node (key from the cocoon contract, value and effect from vk). */
export const PROVIDER_TAINT: Taint = { key: TOLERATION_KEY, value: "cocoon", effect: "NoSchedule" };

/** The labels of a simulated node. */
function nodeLabels(spec: SimNode): Record<string, string> {
  return {
    ...spec.labels,
    [LABEL_NODE_POOL]: spec.pool || DEFAULT_NODE_POOL,
    ...(spec.cpuClass ? { [LABEL_SNAPSHOT_COMPATIBILITY_CLASS]: spec.cpuClass } : {}),
    "kubernetes.io/hostname": spec.name,
    "kubernetes.io/os": "linux",
    "type": NODE_TYPE_VIRTUAL_KUBELET,
    "node-role.kubernetes.io/cocoon-vm": "",
    [LABEL_SIMULATED_NODE]: "true",
  };
}

/** The status a simulated node reports: Ready, pressure-free, `seats` pods of capacity. */
function nodeStatus(spec: SimNode, address: string, now: number): Node["status"] {
  const at = rfc3339(now);
  const condition = (type: string, status: "True" | "False", reason: string) => ({
    type,
    status,
    reason,
    message: `cocoon VM simulator: ${reason}`,
    lastHeartbeatTime: at,
    lastTransitionTime: at,
  });
  const pods = String(Math.max(0, Math.floor(spec.seats)));
  return {
    capacity: { pods },
    allocatable: { pods },
    conditions: [
      condition("Ready", "True", "KubeletReady"),
      condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
      condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
      condition("PIDPressure", "False", "KubeletHasSufficientPID"),
    ],
    addresses: [
      { type: "InternalIP", address },
      { type: "Hostname", address: spec.name },
    ],
    nodeInfo: {
      kubeletVersion: "cocoon-vm-simulator",
      operatingSystem: "linux",
      architecture: "amd64",
    },
  };
}

/**
 * Registers the node, or takes over an existing one of the same name (labels, taints and
 * status are rewritten; a cordon is lifted). `index` picks the node's address.
 */
export async function ensureNode(
  client: Client,
  spec: SimNode,
  index: number,
  now: number,
): Promise<Node> {
  const labels = nodeLabels(spec);
  const status = nodeStatus(spec, `10.255.${(index >> 8) & 255}.${(index & 255) + 1}`, now);
  try {
    await client.create(Nodes, {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: spec.name, labels },
      spec: { taints: [PROVIDER_TAINT] },
      status,
    });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
  // Merge patches replace lists whole: this also drops the admission plugin's not-ready taint.
  await client.patch(Nodes, "", spec.name, "merge", {
    metadata: { labels },
    spec: { taints: [PROVIDER_TAINT], unschedulable: null },
  });
  return await client.patch(Nodes, "", spec.name, "merge", { status }, { subresource: "status" });
}

/** Changes a node's pod capacity (what a test does to fill or free a node). */
export async function setNodeSeats(client: Client, name: string, seats: number): Promise<void> {
  const pods = String(Math.max(0, Math.floor(seats)));
  await client.patch(Nodes, "", name, "merge", {
    status: { capacity: { pods }, allocatable: { pods } },
  }, { subresource: "status" });
}

/** The scheduler's view of a node object with `used` seats taken. */
export function nodeView(node: Node, used: number): NodeView {
  const pods = node.status?.allocatable?.pods ?? node.status?.capacity?.pods ?? "0";
  const seats = Number.parseInt(pods, 10);
  return {
    name: node.metadata.name ?? "",
    labels: node.metadata.labels ?? {},
    taints: node.spec?.taints ?? [],
    unschedulable: node.spec?.unschedulable === true,
    seats: Number.isNaN(seats) ? 0 : seats,
    used,
  };
}
