/**
 * The OpenAPI v3 schemas of both CRDs, written beside the types they validate. Enum lists and
 * defaults come from enums.ts, so the types, the defaulting helpers and the server-side
 * validation cannot drift apart. The CEL rules (and their messages) are behaviour: they must stay
 * exactly as the Go CRDs have them.
 */
import {
  AGENT_MODES,
  BACKENDS,
  COCOON_HIBERNATION_PHASES,
  COCOON_SET_PHASES,
  CONN_TYPES,
  DEFAULT_AGENT_MODE,
  DEFAULT_BACKEND,
  DEFAULT_HIBERNATE_POLICY,
  DEFAULT_OS_TYPE,
  DEFAULT_SNAPSHOT_POLICY,
  DEFAULT_TOOLBOX_MODE,
  HIBERNATE_POLICIES,
  HIBERNATION_DESIRES,
  OS_TYPES,
  SNAPSHOT_POLICIES,
  TOOLBOX_MODES,
} from "./enums.ts";
import {
  arr,
  bool,
  int32,
  int64,
  type JSONSchemaProps,
  mapOf,
  obj,
  quantity,
  str,
  strEnum,
  type ValidationRule,
} from "./openapi.ts";

// --- pieces borrowed from core/v1 and meta/v1 -------------------------------------------------

function localObjectRef(what: string): JSONSchemaProps {
  return obj(`Names a ${what} in the pod's namespace whose keys become environment variables.`, {
    name: str(`Name of the ${what}; leaving it empty is accepted but rarely meant.`, {
      default: "",
    }),
    optional: bool(`When true, a missing ${what} is not an error.`),
  }, { "x-kubernetes-map-type": "atomic" });
}

const envFromSource = obj("One source of environment variables for the VM's pod.", {
  configMapRef: localObjectRef("ConfigMap"),
  prefix: str("Text put in front of every variable name taken from this source."),
  secretRef: localObjectRef("Secret"),
});

const resourceRequirements = obj("CPU, memory and other resources for the VM's pod.", {
  claims: arr(
    "Dynamic resource claims the pod uses, by name.",
    obj("A reference to one of the pod's resource claims.", {
      name: str("Name of the claim in the pod's resourceClaims."),
      request: str("A single request of that claim; empty means all of it."),
    }, { required: ["name"] }),
    { "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map" },
  ),
  limits: mapOf("Upper bounds, by resource name.", quantity(undefined)),
  requests: mapOf("Amounts reserved for scheduling, by resource name.", quantity(undefined)),
});

const condition = obj(
  "One observed aspect of the object's state (the standard metav1 condition).",
  {
    lastTransitionTime: str("When status last changed.", { format: "date-time" }),
    message: str("Human-readable detail; may be empty.", { maxLength: 32768 }),
    observedGeneration: int64("metadata.generation the condition was computed from.", {
      minimum: 0,
    }),
    reason: str("Machine-readable CamelCase cause of the last transition.", {
      maxLength: 1024,
      minLength: 1,
      pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    }),
    status: strEnum("Whether the condition holds.", ["True", "False", "Unknown"]),
    type: str("Condition name, CamelCase, optionally prefixed by a DNS domain.", {
      maxLength: 316,
      pattern:
        "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    }),
  },
  { required: ["lastTransitionTime", "message", "reason", "status", "type"] },
);

const conditions = arr("Standard conditions; Ready summarises the object.", condition, {
  "x-kubernetes-list-map-keys": ["type"],
  "x-kubernetes-list-type": "map",
});

/** apiVersion / kind / metadata, common to every root schema. */
function rootProperties(): Record<string, JSONSchemaProps> {
  return {
    apiVersion: str("API group and version of this object."),
    kind: str("Kind of this object."),
    metadata: { type: "object" },
  };
}

// --- CocoonSet -----------------------------------------------------------------------------------

/** Fields shared by the agent and every toolbox (VMOptions in the types). */
function vmOptions(): Record<string, JSONSchemaProps> {
  return {
    backend: strEnum(
      "Hypervisor that runs the VM; firecracker accepts OCI images only.",
      BACKENDS,
      {
        default: DEFAULT_BACKEND,
      },
    ),
    connType: strEnum(
      "Remote-access protocol to advertise. Leave empty to derive it from the OS " +
        "(ssh for linux, rdp for windows, adb for android).",
      CONN_TYPES,
    ),
    forcePull: bool("Pull the image again even when a cached copy exists."),
    network: str("Cluster network the VM is attached to."),
    noDirectIO: bool(
      "Use the host page cache instead of O_DIRECT for writable disks (cloud-hypervisor only).",
    ),
    os: strEnum("Guest operating system family.", OS_TYPES, { default: DEFAULT_OS_TYPE }),
    probePort: int32("TCP port checked for readiness; 0 keeps the ICMP probe.", {
      maximum: 65535,
      minimum: 0,
    }),
    resources: resourceRequirements,
    storage: quantity("Size of the VM's root volume."),
  };
}

const agentSpec = obj("The agent VMs: one main agent plus `replicas` sub-agents.", {
  ...vmOptions(),
  envFrom: arr("Environment sources for the agent pods.", envFromSource),
  image: str("VM image the agents start from.", { minLength: 1 }),
  mode: strEnum("clone a snapshot, or run the image afresh.", AGENT_MODES, {
    default: DEFAULT_AGENT_MODE,
  }),
  replicas: int32("Number of sub-agents next to the main agent.", { default: 0, minimum: 0 }),
  serviceAccountName: str("Service account of the agent pods."),
}, { required: ["image"] });

const toolboxSpec = obj("An auxiliary VM that lives beside the agents.", {
  ...vmOptions(),
  image: str("VM image of the toolbox (not needed in static mode)."),
  mode: strEnum(
    "run an image, clone a snapshot, or adopt an existing VM (static).",
    TOOLBOX_MODES,
    {
      default: DEFAULT_TOOLBOX_MODE,
    },
  ),
  name: str("Toolbox name, unique in the set; a DNS label.", {
    minLength: 1,
    pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
  }),
  staticIP: str("Static mode: address of the adopted VM."),
  staticVMID: str("Static mode: runtime id of the adopted VM."),
  vncPort: int32("VNC port the toolbox exposes.", { maximum: 65535, minimum: 0 }),
}, { required: ["name"] });

const COCOON_SET_VALIDATIONS: ValidationRule[] = [
  {
    message: "hibernatePolicy=release requires agent.replicas=0 and no toolboxes",
    rule: "!has(self.hibernatePolicy) || self.hibernatePolicy != 'release' || " +
      "((!has(self.agent.replicas) || self.agent.replicas == 0) && " +
      "(!has(self.toolboxes) || size(self.toolboxes) == 0))",
  },
  {
    message: "snapshotCompatibilityClass is immutable once set",
    rule: "!has(oldSelf.snapshotCompatibilityClass) || " +
      "(has(self.snapshotCompatibilityClass) && " +
      "self.snapshotCompatibilityClass == oldSelf.snapshotCompatibilityClass)",
  },
];

const cocoonSetSpec = obj("What the set should run.", {
  agent: agentSpec,
  hibernatePolicy: strEnum(
    "While suspended, keep the VM's node seat (retain) or give it up (release). " +
      "release is only allowed for a set with no sub-agents and no toolboxes.",
    HIBERNATE_POLICIES,
    { default: DEFAULT_HIBERNATE_POLICY },
  ),
  nodeName: str(
    "Node to pin the VMs to (used to migrate). Empty lets the scheduler choose within the pool.",
  ),
  nodePool: str("Cocoon node pool to schedule into.", { default: "default" }),
  snapshotCompatibilityClass: str(
    "CPU compatibility class whose nodes can resume this set's memory snapshots. " +
      "Cannot be changed or removed once set.",
    { maxLength: 63, pattern: "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" },
  ),
  snapshotPolicy: strEnum(
    "Which VMs are snapshotted when they go away: all, only the main agent, or none.",
    SNAPSHOT_POLICIES,
    { default: DEFAULT_SNAPSHOT_POLICY },
  ),
  suspend: bool("Hibernate every VM of the set while true."),
  toolboxes: arr("Toolbox VMs of the set.", toolboxSpec),
}, { required: ["agent"], "x-kubernetes-validations": COCOON_SET_VALIDATIONS });

const agentStatus = obj("Observed state of one agent VM.", {
  forkedFrom: str("VM this agent was forked from."),
  ip: str("VM address."),
  phase: str("Pod phase."),
  podName: str("Pod running the VM."),
  role: str("main or sub-agent."),
  slot: int32("Agent slot; 0 is the main agent."),
  vmID: str("Runtime VM id."),
  vmName: str("VM name."),
}, { required: ["role", "slot"] });

const toolboxStatus = obj("Observed state of one toolbox VM.", {
  connType: strEnum("Protocol the toolbox is reached by.", CONN_TYPES),
  ip: str("VM address."),
  name: str("Toolbox name."),
  phase: str("Pod phase."),
  podName: str("Pod running the VM."),
  vmID: str("Runtime VM id."),
  vmName: str("VM name."),
  vncPort: int32("VNC port, when exposed."),
}, { required: ["name"] });

const cocoonSetStatus = obj("What the operator last observed.", {
  agents: arr("One entry per agent slot.", agentStatus, {
    "x-kubernetes-list-map-keys": ["slot"],
    "x-kubernetes-list-type": "map",
  }),
  conditions,
  desiredAgents: int32("Agents wanted (main plus sub-agents)."),
  desiredToolboxes: int32("Toolboxes wanted."),
  observedGeneration: int64("Generation this status describes."),
  phase: strEnum("Coarse state of the set.", COCOON_SET_PHASES),
  readyAgents: int32("Agents whose pod is Ready."),
  readyToolboxes: int32("Toolboxes whose pod is Ready."),
  toolboxes: arr("One entry per toolbox.", toolboxStatus, {
    "x-kubernetes-list-map-keys": ["name"],
    "x-kubernetes-list-type": "map",
  }),
});

/** The openAPIV3Schema of CocoonSet. */
export const cocoonSetSchema: JSONSchemaProps = obj(
  "A set of VMs managed together: a main agent, optional sub-agents and toolboxes.",
  { ...rootProperties(), spec: cocoonSetSpec, status: cocoonSetStatus },
);

// --- CocoonHibernation ---------------------------------------------------------------------------

const cocoonHibernationSpec = obj("Which pod's VM to act on, and what to do.", {
  desire: strEnum("Hibernate the VM or wake it.", HIBERNATION_DESIRES),
  podRef: obj("The target pod, in the same namespace. Fixed at creation.", {
    name: str("Pod name.", { minLength: 1 }),
  }, {
    required: ["name"],
    "x-kubernetes-validations": [{ message: "spec.podRef is immutable", rule: "self == oldSelf" }],
  }),
}, { required: ["desire", "podRef"] });

const cocoonHibernationStatus = obj("What the operator last observed.", {
  conditions,
  observedGeneration: int64("Generation this status describes."),
  phase: strEnum("Progress of the request.", COCOON_HIBERNATION_PHASES),
  vmName: str("VM behind the target pod."),
});

/** The openAPIV3Schema of CocoonHibernation. */
export const cocoonHibernationSchema: JSONSchemaProps = obj(
  "A request to hibernate or wake the VM behind one pod.",
  { ...rootProperties(), spec: cocoonHibernationSpec, status: cocoonHibernationStatus },
);
