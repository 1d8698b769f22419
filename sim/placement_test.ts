import assert from "node:assert/strict";
import type { Pod, Toleration } from "../kube/core.ts";
import { type NodeView, place, unschedulableMessage } from "./placement.ts";

const PROVIDER_TAINT = {
  key: "virtual-kubelet.io/provider",
  value: "cocoon",
  effect: "NoSchedule" as const,
};

function node(name: string, extra: Partial<NodeView> = {}): NodeView {
  return {
    name,
    labels: {
      "cocoonstack.io/pool": "default",
      "kubernetes.io/hostname": name,
      "type": "virtual-kubelet",
    },
    taints: [PROVIDER_TAINT],
    unschedulable: false,
    seats: 2,
    used: 0,
    ...extra,
  };
}

/** The operator's tolerations (original-behaviour §1.2). */
const COCOON_TOLERATIONS: Toleration[] = [
  { key: "virtual-kubelet.io/provider", operator: "Exists" },
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
];

function pod(spec: Partial<NonNullable<Pod["spec"]>> = {}): Pod {
  return {
    metadata: { name: "demo-0", namespace: "ns" },
    spec: {
      containers: [{ name: "agent" }],
      tolerations: COCOON_TOLERATIONS,
      nodeSelector: { "cocoonstack.io/pool": "default" },
      ...spec,
    },
  };
}

Deno.test("placement: nodeSelector picks the pool; the CPU class narrows it", () => {
  const nodes = [
    node("a", { labels: { "cocoonstack.io/pool": "gpu", "kubernetes.io/hostname": "a" } }),
    node("b", {
      labels: {
        "cocoonstack.io/pool": "default",
        "cocoonstack.io/snapshot-cpu-class": "zen4",
        "kubernetes.io/hostname": "b",
      },
    }),
    node("c"),
  ];
  assert.deepEqual(place(pod(), nodes), { node: "b" }, "both b and c fit: equal free, first name");
  assert.deepEqual(
    place(
      pod({
        nodeSelector: {
          "cocoonstack.io/pool": "default",
          "cocoonstack.io/snapshot-cpu-class": "zen4",
        },
      }),
      [nodes[0], nodes[2], nodes[1]],
    ),
    { node: "b" },
  );
});

Deno.test("placement: required hostname affinity pins; preferred affinity wins ties", () => {
  const nodes = [node("a"), node("b"), node("c")];
  const required = pod({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{
            matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["c"] }],
          }],
        },
      },
    },
  });
  assert.deepEqual(place(required, nodes), { node: "c" });
  const preferred = pod({
    affinity: {
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [{
          weight: 100,
          preference: {
            matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["b"] }],
          },
        }],
      },
    },
  });
  assert.deepEqual(place(preferred, nodes), { node: "b" });
  // A preference is not a requirement: a full hint node sends the pod elsewhere.
  assert.deepEqual(place(preferred, [node("a"), node("b", { used: 2 })]), { node: "a" });
});

Deno.test("placement: NotIn, Exists, DoesNotExist, Gt and matchFields", () => {
  const nodes = [
    node("a", { labels: { "kubernetes.io/hostname": "a", rank: "3" } }),
    node("b", { labels: { "kubernetes.io/hostname": "b", rank: "7", ssd: "" } }),
  ];
  const withTerm = (term: object) =>
    pod({
      nodeSelector: {},
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [term] },
        },
      },
    });
  const exprs = (e: object) => withTerm({ matchExpressions: [e] });
  assert.deepEqual(
    place(exprs({ key: "kubernetes.io/hostname", operator: "NotIn", values: ["a"] }), nodes),
    { node: "b" },
  );
  assert.deepEqual(place(exprs({ key: "ssd", operator: "Exists" }), nodes), { node: "b" });
  assert.deepEqual(place(exprs({ key: "ssd", operator: "DoesNotExist" }), nodes), { node: "a" });
  assert.deepEqual(place(exprs({ key: "rank", operator: "Gt", values: ["5"] }), nodes), {
    node: "b",
  });
  assert.deepEqual(
    place(withTerm({ matchFields: [{ key: "metadata.name", operator: "In", values: ["b"] }] }), [
      nodes[0],
      nodes[1],
    ]),
    { node: "b" },
  );
});

Deno.test("placement: the taint keeps intolerant pods off; a cordoned node is skipped", () => {
  const intolerant = pod({ tolerations: [] });
  assert.deepEqual(place(intolerant, [node("a")]), {
    unschedulable: "0/1 nodes are available: 1 node(s) had untolerated taint " +
      "{virtual-kubelet.io/provider: cocoon}. preemption: 0/1 nodes are available: " +
      "1 Preemption is not helpful for scheduling.",
  });
  assert.deepEqual(place(pod(), [node("a", { unschedulable: true }), node("b")]), { node: "b" });
});

Deno.test("placement: no fit explains every node like the real scheduler", () => {
  const nodes = [
    node("a", { used: 2 }),
    node("b", { labels: { "cocoonstack.io/pool": "other" } }),
    node("c", { labels: { "cocoonstack.io/pool": "other" } }),
  ];
  assert.deepEqual(place(pod(), nodes), {
    unschedulable: "0/3 nodes are available: 1 Too many pods, " +
      "2 node(s) didn't match Pod's node affinity/selector. " +
      "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, " +
      "2 Preemption is not helpful for scheduling.",
  });
  assert.equal(unschedulableMessage([]), "no nodes available to schedule pods");
});

Deno.test("placement: terminating pods still count: seats are only freed when released", () => {
  assert.ok("unschedulable" in place(pod(), [node("a", { seats: 1, used: 1 })]));
  assert.deepEqual(place(pod(), [node("a", { seats: 1, used: 0 })]), { node: "a" });
  assert.deepEqual(place(pod(), [node("a", { used: 1 }), node("b")]), { node: "b" }, "most free");
});
