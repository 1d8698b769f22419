/**
 * The label, annotation, role, toleration and tag strings cocoon components agree on. They are
 * the wire contract between the operator, vk-cocoon and the webhook, so every value is exactly
 * the one cocoon-common v0.3.0 defines.
 */

/** Kind string of CocoonSet owner references. */
export const KindCocoonSet = "CocoonSet";

/** Toleration key that lets cocoon pods land on vk-cocoon (virtual-kubelet) nodes. */
export const TolerationKey = "virtual-kubelet.io/provider";

/** Pod label: name of the owning CocoonSet. */
export const LabelCocoonSet = "cocoonset.cocoonstack.io/name";
/** Pod label: main / sub-agent / toolbox. */
export const LabelRole = "cocoonset.cocoonstack.io/role";
/** Pod label: the agent slot index (0 = main). */
export const LabelSlot = "cocoonset.cocoonstack.io/slot";

/** Node pool selector (node selector key, pod label or annotation). */
export const LabelNodePool = "cocoonstack.io/pool";
/** The pool used when none is named. */
export const DefaultNodePool = "default";
/** Node label naming the CPU ABI class that can resume a set's memory snapshots. */
export const LabelSnapshotCompatibilityClass = "cocoonstack.io/snapshot-cpu-class";

/** VM provisioning mode (clone / run / static). */
export const AnnotationMode = "cocoonset.cocoonstack.io/mode";
/** VM image reference. */
export const AnnotationImage = "cocoonset.cocoonstack.io/image";
/** Root volume size, a canonical resource quantity. */
export const AnnotationStorage = "cocoonset.cocoonstack.io/storage";
/** "true" when the VM's lifecycle is owned by cocoon (absent for static toolboxes). */
export const AnnotationManaged = "cocoonset.cocoonstack.io/managed";
/** Guest OS family. */
export const AnnotationOS = "cocoonset.cocoonstack.io/os";
/** Snapshot policy copied onto each pod. */
export const AnnotationSnapshotPolicy = "cocoonset.cocoonstack.io/snapshot-policy";
/** Cluster network the VM attaches to. */
export const AnnotationNetwork = "cocoonset.cocoonstack.io/network";
/** "true" to skip the image cache. */
export const AnnotationForcePull = "cocoonset.cocoonstack.io/force-pull";
/** CocoonSet metadata.generation stamped on the pod by the operator. */
export const AnnotationCocoonSetGeneration = "cocoonset.cocoonstack.io/generation";
/** Node the main agent ran on when a release-policy set was suspended (warm-restore hint). */
export const AnnotationHibernatedOnNode = "cocoonset.cocoonstack.io/hibernated-on-node";

/** Runtime VM id written by vk-cocoon once the VM exists. */
export const AnnotationVMID = "vm.cocoonstack.io/id";
/** Deterministic VM name chosen by the operator. */
export const AnnotationVMName = "vm.cocoonstack.io/name";
/** The VM's primary IPv4 address. */
export const AnnotationIP = "vm.cocoonstack.io/ip";
/** The VM's VNC port, when it has one. */
export const AnnotationVNCPort = "vm.cocoonstack.io/vnc-port";
/** "true" asks vk-cocoon to hibernate the VM. */
export const AnnotationHibernate = "vm.cocoonstack.io/hibernate";
/** "true" makes a new pod restore its VM from the :hibernate snapshot instead of the image. */
export const AnnotationRestoreFromHibernate = "vm.cocoonstack.io/restore-from-hibernate";
/** "true" asks vk-cocoon to keep the node-local snapshot when the pod is deleted (seat release). */
export const AnnotationKeepSnapshotOnDelete = "vm.cocoonstack.io/keep-snapshot-on-delete";
/** VM to fork the new VM from. */
export const AnnotationForkFrom = "vm.cocoonstack.io/fork-from";
/** Host directory to clone the VM image from (vk-cocoon specific). */
export const AnnotationCloneFromDir = "vm.cocoonstack.io/clone-from-dir";
/** Explicit connection protocol, overriding inference from the OS. */
export const AnnotationConnType = "vm.cocoonstack.io/conn-type";
/** Hypervisor backend. */
export const AnnotationBackend = "vm.cocoonstack.io/backend";
/** "true" turns off O_DIRECT on writable disks (cloud-hypervisor only). */
export const AnnotationNoDirectIO = "vm.cocoonstack.io/no-direct-io";
/** TCP port probed for readiness instead of ICMP. */
export const AnnotationProbePort = "vm.cocoonstack.io/probe-port";
/** Lifecycle state reported by vk-cocoon (lower case: creating, ready, ...). */
export const AnnotationLifecycleState = "vm.cocoonstack.io/lifecycle-state";
/** CocoonSet generation vk-cocoon had seen when it reported the lifecycle state. */
export const AnnotationLifecycleObservedGeneration =
  "vm.cocoonstack.io/lifecycle-observed-generation";
/** Optional detail accompanying the lifecycle state. */
export const AnnotationLifecycleStateMessage = "vm.cocoonstack.io/lifecycle-state-message";

/** Role of the main agent (slot 0). */
export const RoleMain = "main";
/** Role of a sub-agent (slot > 0). */
export const RoleSubAgent = "sub-agent";
/** Role of a toolbox VM. */
export const RoleToolbox = "toolbox";

/** Snapshot tag written when a VM hibernates. */
export const HibernateSnapshotTag = "hibernate";
/** Snapshot tag used otherwise. */
export const DefaultSnapshotTag = "latest";

/** The only value boolean annotations are compared against. */
export const AnnotationTrue = "true";
