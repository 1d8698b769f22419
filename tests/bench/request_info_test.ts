import assert from "node:assert/strict";
import {
  classifyRequest,
  countByResource,
  countByVerb,
  isWrite,
  tallyRequests,
} from "./request_info.ts";

const BASE = "http://127.0.0.1:1";
const info = (method: string, path: string) => classifyRequest(method, new URL(BASE + path));

Deno.test("request_info: core resources by verb, named and collection", () => {
  assert.deepEqual(info("GET", "/api/v1/namespaces/a/pods/p-0"), {
    verb: "get",
    resource: "pods",
    namespace: "a",
    dryRun: false,
  });
  assert.deepEqual(info("GET", "/api/v1/namespaces/a/pods?labelSelector=x"), {
    verb: "list",
    resource: "pods",
    namespace: "a",
    dryRun: false,
  });
  assert.deepEqual(info("GET", "/api/v1/pods?watch=true&resourceVersion=5"), {
    verb: "watch",
    resource: "pods",
    namespace: "",
    dryRun: false,
  });
  assert.equal(info("POST", "/api/v1/namespaces/a/events").verb, "create");
  assert.equal(info("PUT", "/api/v1/namespaces/a/pods/p").verb, "update");
  assert.equal(info("PATCH", "/api/v1/namespaces/a/pods/p").verb, "patch");
  assert.equal(info("DELETE", "/api/v1/namespaces/a/pods/p").verb, "delete");
  assert.equal(info("DELETE", "/api/v1/namespaces/a/pods").verb, "deletecollection");
});

Deno.test("request_info: named groups and subresources carry the group", () => {
  assert.deepEqual(
    info("PUT", "/apis/cocoonset.cocoonstack.io/v1/namespaces/a/cocoonsets/s/status"),
    {
      verb: "update",
      resource: "cocoonsets.cocoonset.cocoonstack.io/status",
      namespace: "a",
      dryRun: false,
    },
  );
  assert.deepEqual(info("POST", "/api/v1/namespaces/a/pods/p/binding"), {
    verb: "create",
    resource: "pods/binding",
    namespace: "a",
    dryRun: false,
  });
  assert.deepEqual(
    info("GET", "/apis/coordination.k8s.io/v1/namespaces/cocoon-system/leases?watch=1"),
    {
      verb: "watch",
      resource: "leases.coordination.k8s.io",
      namespace: "cocoon-system",
      dryRun: false,
    },
  );
  assert.equal(info("GET", "/apis/cocoonset.cocoonstack.io/v1/cocoonsets").verb, "list");
});

Deno.test("request_info: the namespace object itself and the old watch prefix", () => {
  assert.deepEqual(info("GET", "/api/v1/namespaces/team-a"), {
    verb: "get",
    resource: "namespaces",
    namespace: "team-a",
    dryRun: false,
  });
  assert.deepEqual(info("GET", "/api/v1/namespaces"), {
    verb: "list",
    resource: "namespaces",
    namespace: "",
    dryRun: false,
  });
  assert.deepEqual(info("GET", "/api/v1/watch/namespaces/a/pods"), {
    verb: "watch",
    resource: "pods",
    namespace: "a",
    dryRun: false,
  });
});

Deno.test("request_info: discovery and other non-resource paths keep their path", () => {
  for (const path of ["/apis", "/api/v1", "/version"]) {
    assert.deepEqual(info("GET", path), {
      verb: "get",
      resource: path,
      namespace: "",
      dryRun: false,
    });
  }
});

Deno.test("request_info: a dry-run create is told apart and is not a write", () => {
  const dry = info("POST", "/api/v1/namespaces/a/pods?dryRun=All");
  assert.deepEqual(dry, { verb: "create", resource: "pods", namespace: "a", dryRun: true });
  assert.equal(isWrite(dry), false);
  assert.equal(isWrite(info("POST", "/api/v1/namespaces/a/pods")), true);
  assert.equal(isWrite(info("GET", "/api/v1/namespaces/a/pods")), false);
  assert.deepEqual(countByResource([dry, info("POST", "/api/v1/namespaces/a/pods")]), {
    pods: { create: 1, "create (dry run)": 1 },
  });
});

Deno.test("request_info: tallies are keyed by resource then verb, sorted", () => {
  const requests = [
    info("POST", "/api/v1/namespaces/a/pods"),
    info("GET", "/api/v1/pods?watch=true"),
    info("POST", "/api/v1/namespaces/b/pods"),
    info("POST", "/api/v1/namespaces/a/events"),
  ];
  const byResource = countByResource(requests);
  assert.deepEqual(byResource, { events: { create: 1 }, pods: { create: 2, watch: 1 } });
  assert.deepEqual(Object.keys(byResource), ["events", "pods"]);
  assert.deepEqual(countByVerb(requests), { create: 3, watch: 1 });
});

Deno.test("request_info: a span's tally counts conflicts and names each failure by verb and status", () => {
  const answered = (method: string, path: string, status: number) => ({
    ...info(method, path),
    status,
  });
  const tally = tallyRequests([
    answered("PATCH", "/api/v1/namespaces/a/pods/p", 200),
    answered("PUT", "/apis/cocoonset.cocoonstack.io/v1/namespaces/a/cocoonsets/s", 409),
    answered("GET", "/api/v1/namespaces/a/pods/q", 404),
    answered("GET", "/api/v1/pods?watch=1", 0),
  ]);
  assert.equal(tally.total, 4);
  assert.equal(tally.conflicts, 1);
  assert.deepEqual(tally.byVerb, { get: 1, patch: 1, update: 1, watch: 1 });
  assert.deepEqual(tally.failedByResource, {
    "cocoonsets.cocoonset.cocoonstack.io": { "update 409": 1 },
    pods: { "get 404": 1, "watch 0": 1 },
  });
});
