/**
 * The label, annotation, role, toleration and tag strings cocoon components agree on. They are
 * the wire contract between the operator, vk-cocoon and the webhook, so every value is exactly
 * the one cocoon-common v0.3.0 defines.
 */

/** Kind string of CocoonSet owner references. */
export const KIND_COCOON_SET = "CocoonSet";

/** Toleration key that lets cocoon pods land on vk-cocoon (virtual-kubelet) nodes. */
export const TOLERATION_KEY = "virtual-kubelet.io/provider";

/** Pod label: name of the owning CocoonSet. */
export const LABEL_COCOON_SET = "cocoonset.cocoonstack.io/name";
/** Pod label: main / sub-agent / toolbox. */
export const LABEL_ROLE = "cocoonset.cocoonstack.io/role";
/** Pod label: the agent slot index (0 = main). */
export const LABEL_SLOT = "cocoonset.cocoonstack.io/slot";

/** Node pool selector (node selector key, pod label or annotation). */
export const LABEL_NODE_POOL = "cocoonstack.io/pool";
/** The pool used when none is named. */
export const DEFAULT_NODE_POOL = "default";
/** Node label naming the CPU ABI class that can resume a set's memory snapshots. */
export const LABEL_SNAPSHOT_COMPATIBILITY_CLASS = "cocoonstack.io/snapshot-cpu-class";

/** VM provisioning mode (clone / run / static). */
export const ANNOTATION_MODE = "cocoonset.cocoonstack.io/mode";
/** VM image reference. */
export const ANNOTATION_IMAGE = "cocoonset.cocoonstack.io/image";
/** Root volume size, a canonical resource quantity. */
export const ANNOTATION_STORAGE = "cocoonset.cocoonstack.io/storage";
/** "true" when the VM's lifecycle is owned by cocoon (absent for static toolboxes). */
export const ANNOTATION_MANAGED = "cocoonset.cocoonstack.io/managed";
/** Guest OS family. */
export const ANNOTATION_OS = "cocoonset.cocoonstack.io/os";
/** Snapshot policy copied onto each pod. */
export const ANNOTATION_SNAPSHOT_POLICY = "cocoonset.cocoonstack.io/snapshot-policy";
/** Cluster network the VM attaches to. */
export const ANNOTATION_NETWORK = "cocoonset.cocoonstack.io/network";
/** "true" to skip the image cache. */
export const ANNOTATION_FORCE_PULL = "cocoonset.cocoonstack.io/force-pull";
/** CocoonSet metadata.generation stamped on the pod by the operator. */
export const ANNOTATION_COCOON_SET_GENERATION = "cocoonset.cocoonstack.io/generation";
/** Node the main agent ran on when a release-policy set was suspended (warm-restore hint). */
export const ANNOTATION_HIBERNATED_ON_NODE = "cocoonset.cocoonstack.io/hibernated-on-node";

/** Runtime VM id written by vk-cocoon once the VM exists. */
export const ANNOTATION_VMID = "vm.cocoonstack.io/id";
/** Deterministic VM name chosen by the operator. */
export const ANNOTATION_VM_NAME = "vm.cocoonstack.io/name";
/** The VM's primary IPv4 address. */
export const ANNOTATION_IP = "vm.cocoonstack.io/ip";
/** The VM's VNC port, when it has one. */
export const ANNOTATION_VNC_PORT = "vm.cocoonstack.io/vnc-port";
/** "true" asks vk-cocoon to hibernate the VM. */
export const ANNOTATION_HIBERNATE = "vm.cocoonstack.io/hibernate";
/** "true" makes a new pod restore its VM from the :hibernate snapshot instead of the image. */
export const ANNOTATION_RESTORE_FROM_HIBERNATE = "vm.cocoonstack.io/restore-from-hibernate";
/** "true" asks vk-cocoon to keep the node-local snapshot when the pod is deleted (seat release). */
export const ANNOTATION_KEEP_SNAPSHOT_ON_DELETE = "vm.cocoonstack.io/keep-snapshot-on-delete";
/** VM to fork the new VM from. */
export const ANNOTATION_FORK_FROM = "vm.cocoonstack.io/fork-from";
/** Host directory to clone the VM image from (vk-cocoon specific). */
export const ANNOTATION_CLONE_FROM_DIR = "vm.cocoonstack.io/clone-from-dir";
/** Explicit connection protocol, overriding inference from the OS. */
export const ANNOTATION_CONN_TYPE = "vm.cocoonstack.io/conn-type";
/** Hypervisor backend. */
export const ANNOTATION_BACKEND = "vm.cocoonstack.io/backend";
/** "true" turns off O_DIRECT on writable disks (cloud-hypervisor only). */
export const ANNOTATION_NO_DIRECT_IO = "vm.cocoonstack.io/no-direct-io";
/** TCP port probed for readiness instead of ICMP. */
export const ANNOTATION_PROBE_PORT = "vm.cocoonstack.io/probe-port";
/** Lifecycle state reported by vk-cocoon (lower case: creating, ready, ...). */
export const ANNOTATION_LIFECYCLE_STATE = "vm.cocoonstack.io/lifecycle-state";
/** CocoonSet generation vk-cocoon had seen when it reported the lifecycle state. */
export const ANNOTATION_LIFECYCLE_OBSERVED_GENERATION =
  "vm.cocoonstack.io/lifecycle-observed-generation";
/** Optional detail accompanying the lifecycle state. */
export const ANNOTATION_LIFECYCLE_STATE_MESSAGE = "vm.cocoonstack.io/lifecycle-state-message";

/** Role of the main agent (slot 0). */
export const ROLE_MAIN = "main";
/** Role of a sub-agent (slot > 0). */
export const ROLE_SUB_AGENT = "sub-agent";
/** Role of a toolbox VM. */
export const ROLE_TOOLBOX = "toolbox";

/** The only value boolean annotations are compared against. */
export const ANNOTATION_TRUE = "true";
