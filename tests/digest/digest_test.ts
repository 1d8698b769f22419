import { deepStrictEqual, strictEqual as assertEquals } from "node:assert/strict";
import {
  addAuditLog,
  addRegistryLog,
  addScrape,
  digestOfDir,
  emptyDigest,
  eventKey,
  OPERATOR_USER,
  registryPathShape,
  requestKey,
  sorted,
  statusWriteKeys,
} from "./digest.ts";

const OPERATOR = { username: OPERATOR_USER };
const ADMIN = { username: "envtest-admin" };

/** One audit line as kube-apiserver writes it (the fields the digest reads). */
function audit(fields: Record<string, unknown>): string {
  return JSON.stringify({
    kind: "Event",
    apiVersion: "audit.k8s.io/v1",
    stage: "ResponseComplete",
    auditID: crypto.randomUUID(),
    responseStatus: { code: 200 },
    ...fields,
  });
}

Deno.test("digest: request keys name verb, resource, subresource, scope and dry run", () => {
  assertEquals(
    requestKey({
      verb: "create",
      requestURI: "/api/v1/namespaces/a/pods?dryRun=All&fieldManager=x",
      objectRef: { resource: "pods", namespace: "a" },
    }),
    "create core/pods namespaced dryRun",
  );
  assertEquals(
    requestKey({
      verb: "patch",
      requestURI: "/apis/cocoonset.cocoonstack.io/v1/namespaces/a/cocoonsets/x/status",
      objectRef: {
        resource: "cocoonsets",
        subresource: "status",
        namespace: "a",
        apiGroup: "cocoonset.cocoonstack.io",
      },
    }),
    "patch cocoonset.cocoonstack.io/cocoonsets/status namespaced",
  );
  assertEquals(
    requestKey({
      verb: "watch",
      requestURI: "/api/v1/pods?watch=true",
      objectRef: { resource: "pods" },
    }),
    "watch core/pods cluster",
  );
  assertEquals(
    requestKey({ verb: "get", requestURI: "/version?timeout=5s" }),
    "get path:/version cluster",
  );
});

Deno.test("digest: only the operator's requests count, each audit ID once", () => {
  const d = emptyDigest();
  const id = "watch-1";
  const ref = { resource: "pods" };
  const log = [
    audit({ auditID: id, stage: "ResponseStarted", verb: "watch", user: OPERATOR, objectRef: ref }),
    audit({
      auditID: id,
      stage: "ResponseComplete",
      verb: "watch",
      user: OPERATOR,
      objectRef: ref,
    }),
    // The test's own client and the simulator share the admin identity: never counted.
    audit({ verb: "list", user: ADMIN, userAgent: "Deno/2.9.6", objectRef: ref }),
    // Another operator identity (a developer kubeconfig) is known by its User-Agent.
    audit({
      verb: "list",
      user: { username: "dev" },
      userAgent: "cocoon-operator/0.1.0",
      objectRef: ref,
    }),
    '{"truncated":', // a plane killed mid-write
  ].join("\n");
  addAuditLog(d, log, new Set());
  deepStrictEqual(d.requests, { "watch core/pods cluster": 1, "list core/pods cluster": 1 });
  deepStrictEqual(d.responses, { "watch core/pods 200": 1, "list core/pods 200": 1 });
  assertEquals(d.inputs.operatorRequests, 2);
  assertEquals(d.inputs.auditEvents, 4);
});

Deno.test("digest: a watch still open when the plane stopped answers 'open'", () => {
  const d = emptyDigest();
  addAuditLog(
    d,
    audit({
      stage: "ResponseStarted",
      verb: "watch",
      user: OPERATOR,
      objectRef: { resource: "pods" },
    }),
    new Set(),
  );
  deepStrictEqual(d.responses, { "watch core/pods open": 1 });
});

Deno.test("digest: Event creates keyed by reason, type, kind, reporter; patches as repeats", () => {
  const body = {
    metadata: { name: "demo.1", namespace: "a" },
    involvedObject: { kind: "CocoonSet", name: "demo", uid: "u1" },
    reason: "InvalidSpec",
    type: "Warning",
    message: "varies from run to run",
    source: { component: "cocoon-operator" },
  };
  assertEquals(eventKey(body), "InvalidSpec Warning CocoonSet by cocoon-operator");
  assertEquals(
    eventKey({ regarding: { kind: "Pod" }, reason: "R", type: "Normal", reportingController: "c" }),
    "R Normal Pod by c",
  );
  const d = emptyDigest();
  const ref = { resource: "events", namespace: "a", name: "demo.1" };
  const log = [
    // The patch may be read before its create only if the create was in an earlier log.
    audit({
      verb: "create",
      user: OPERATOR,
      objectRef: ref,
      requestObject: body,
      responseStatus: { code: 201 },
    }),
    audit({ verb: "patch", user: OPERATOR, objectRef: ref, requestObject: { count: 2 } }),
    audit({ verb: "patch", user: OPERATOR, objectRef: ref, requestObject: { count: 3 } }),
    audit({
      verb: "patch",
      user: OPERATOR,
      objectRef: { ...ref, name: "gone.2" },
      requestObject: {},
    }),
    // A failed create is no Event.
    audit({
      verb: "create",
      user: OPERATOR,
      objectRef: ref,
      requestObject: body,
      responseStatus: { code: 409 },
    }),
  ].join("\n");
  addAuditLog(d, log, new Set());
  deepStrictEqual(d.events, { "InvalidSpec Warning CocoonSet by cocoon-operator": 1 });
  deepStrictEqual(d.eventRepeats, {
    "InvalidSpec Warning CocoonSet by cocoon-operator": 2,
    "? (created before recording)": 1,
  });
});

Deno.test("digest: status writes keyed by the status they left, fields sent apart", () => {
  const ref = {
    resource: "cocoonsets",
    subresource: "status",
    namespace: "a",
    apiGroup: "cocoonset.cocoonstack.io",
  };
  const keys = statusWriteKeys({
    verb: "patch",
    objectRef: ref,
    requestObject: {
      status: {
        phase: "Pending",
        readyAgents: 0,
        conditions: [
          {
            type: "Ready",
            status: "False",
            reason: "InvalidSpec",
            message: "x",
            lastTransitionTime: "t",
          },
          { type: "Progressing", status: "True", reason: "Reconciling" },
        ],
      },
    },
  });
  deepStrictEqual(keys, {
    write: "cocoonset.cocoonstack.io/cocoonsets/status patch phase=Pending " +
      "conditions=[Progressing=True/Reconciling,Ready=False/InvalidSpec]",
    fields:
      "cocoonset.cocoonstack.io/cocoonsets/status patch fields=[conditions,phase,readyAgents]",
  });
  assertEquals(
    statusWriteKeys({
      verb: "patch",
      objectRef: ref,
      requestObject: { metadata: { resourceVersion: "5" } },
    })
      .write,
    "cocoonset.cocoonstack.io/cocoonsets/status patch nostatus",
  );
  assertEquals(
    statusWriteKeys({
      verb: "patch",
      objectRef: ref,
      requestObject: [{ op: "replace", path: "/status/phase" }],
    })
      .write,
    "cocoonset.cocoonstack.io/cocoonsets/status patch jsonpatch=[replace:/status/phase]",
  );
  // A merge patch of one field: the answer (RequestResponse level) says what the status became.
  deepStrictEqual(
    statusWriteKeys({
      verb: "patch",
      objectRef: ref,
      requestObject: { status: { readyAgents: 1 } },
      responseObject: {
        kind: "CocoonSet",
        status: {
          phase: "Running",
          readyAgents: 1,
          conditions: [{ type: "Ready", status: "True", reason: "AllAgentsReady" }],
        },
      },
    }),
    {
      write: "cocoonset.cocoonstack.io/cocoonsets/status patch phase=Running " +
        "conditions=[Ready=True/AllAgentsReady]",
      fields: "cocoonset.cocoonstack.io/cocoonsets/status patch fields=[readyAgents]",
    },
  );
  // In a log: a 409 wrote nothing; a read of the status is no write.
  const d = emptyDigest();
  addAuditLog(
    d,
    [
      audit({
        verb: "patch",
        user: OPERATOR,
        objectRef: ref,
        requestObject: { status: { phase: "Running" } },
      }),
      audit({
        verb: "patch",
        user: OPERATOR,
        objectRef: ref,
        requestObject: { status: { phase: "Running" } },
        responseStatus: { code: 409 },
      }),
      audit({ verb: "get", user: OPERATOR, objectRef: ref }),
    ].join("\n"),
    new Set(),
  );
  deepStrictEqual(d.statusWrites, {
    "cocoonset.cocoonstack.io/cocoonsets/status patch phase=Running conditions=[-]": 1,
  });
});

Deno.test("digest: metric families with their type and label-name sets, values ignored", () => {
  const d = emptyDigest();
  addScrape(
    d,
    [
      "# HELP workqueue_adds_total Adds.",
      "# TYPE workqueue_adds_total counter",
      'workqueue_adds_total{controller="cocoonset",name="cocoonset"} 17',
      "# TYPE controller_runtime_reconcile_time_seconds histogram",
      'controller_runtime_reconcile_time_seconds_bucket{controller="c",le="0.5"} 3',
      'controller_runtime_reconcile_time_seconds_sum{controller="c"} 0.25',
      'controller_runtime_reconcile_time_seconds_count{controller="c"} 3',
      "# TYPE cocoon_operator_subagent_rebuild_total counter",
      "# TYPE rest_client_requests_total counter",
      'rest_client_requests_total{code="200",method="GET"} 4',
      'rest_client_requests_total{code="200",host="h",method="GET"} 4',
      "",
    ].join("\n"),
  );
  deepStrictEqual(d.metrics, {
    "workqueue_adds_total counter": 1,
    "workqueue_adds_total counter {controller,name}": 1,
    "controller_runtime_reconcile_time_seconds histogram": 1,
    "controller_runtime_reconcile_time_seconds histogram {controller}": 1,
    // Registered, never filled: the family alone, no label set.
    "cocoon_operator_subagent_rebuild_total counter": 1,
    "rest_client_requests_total counter": 1,
    "rest_client_requests_total counter {code,method}": 1,
    "rest_client_requests_total counter {code,host,method}": 1,
  });
  assertEquals(d.inputs.scrapes, 1);
});

Deno.test("digest: sections come out with sorted keys whatever order they were counted in", () => {
  const d = emptyDigest();
  d.requests["watch core/pods cluster"] = 1;
  d.requests["get core/pods namespaced"] = 2;
  d.metrics["z gauge"] = 1;
  d.metrics["a gauge"] = 1;
  const out = sorted(d);
  deepStrictEqual(Object.keys(out.requests), [
    "get core/pods namespaced",
    "watch core/pods cluster",
  ]);
  deepStrictEqual(Object.keys(out.metrics), ["a gauge", "z gauge"]);
});

Deno.test("digest: a folder's digest is the same JSON whatever order its files were written", async () => {
  const write = async (dir: string, files: [string, string][]) => {
    for (const [name, text] of files) await Deno.writeTextFile(`${dir}/${name}`, text);
  };
  const line = (verb: string) =>
    audit({ auditID: verb, verb, user: OPERATOR, objectRef: { resource: "pods", namespace: "a" } });
  const files: [string, string][] = [
    ["audit-1.jsonl", line("get")],
    ["audit-2.jsonl", line("list")],
    ["metrics-1.prom", "# TYPE up gauge\nup 1\n"],
    ["notes.txt", "ignored"],
  ];
  const a = await Deno.makeTempDir();
  const b = await Deno.makeTempDir();
  try {
    await write(a, files);
    await write(b, [...files].reverse());
    const da = JSON.stringify(await digestOfDir(a));
    assertEquals(da, JSON.stringify(await digestOfDir(b)));
    deepStrictEqual(Object.keys(JSON.parse(da).requests), [
      "get core/pods namespaced",
      "list core/pods namespaced",
    ]);
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

Deno.test("digest: registry requests by method and path shape, repositories left out", () => {
  assertEquals(registryPathShape("/v2/"), "/v2/");
  assertEquals(
    registryPathShape("/v2/cocoon/vk-a-demo-0/manifests/hibernate"),
    "manifests/hibernate",
  );
  assertEquals(
    registryPathShape("/v2/cocoon/vk-b-x-1/manifests/sha256:0123abcd"),
    "manifests/<digest>",
  );
  assertEquals(registryPathShape("/v2/cocoon/vk-a-demo-0/tags/list"), "tags/list");
  const d = emptyDigest();
  addRegistryLog(
    d,
    [
      { method: "HEAD", path: "/v2/cocoon/vk-a-one-0/manifests/hibernate", status: 200 },
      { method: "HEAD", path: "/v2/cocoon/vk-a-two-0/manifests/hibernate", status: 404 },
      { method: "DELETE", path: "/v2/cocoon/vk-a-one-0/manifests/sha256:ab", status: 202 },
    ].map((r) => JSON.stringify(r)).join("\n") + "\n",
  );
  deepStrictEqual(d.registry, { "HEAD manifests/hibernate": 2, "DELETE manifests/<digest>": 1 });
  deepStrictEqual(d.registryResponses, {
    "HEAD manifests/hibernate 200": 1,
    "HEAD manifests/hibernate 404": 1,
    "DELETE manifests/<digest> 202": 1,
  });
  assertEquals(d.inputs.registryRequests, 3);
});
