import assert from "node:assert/strict";
import type { NumberedSimEvent, SimEvent } from "../../sim/events.ts";
import type { ProxiedRequest } from "../harness/registry_proxy.ts";
import { judgeSnapshots, manifestTarget } from "./_snapshot_guard.ts";

const VM = "vk-ns-demo-0";
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

let seq = 0;
function ev(at: number, type: SimEvent["type"], extra: Partial<SimEvent> = {}): NumberedSimEvent {
  return { seq: ++seq, at, type, namespace: "ns", name: "demo-0", vmName: VM, ...extra };
}

function del(at: number, ref: string, status = 202): ProxiedRequest {
  const path = `/v2/cocoon/${VM}/manifests/${ref}`;
  return { method: "DELETE", path, repo: `cocoon/${VM}`, status, at };
}

/** A hibernation pushed at 100 (digest D1), the VM down at 110. */
const hibernated = () => [
  ev(100, "pushed", { detail: `${VM}:hibernate`, digest: D1 }),
  ev(110, "hibernated"),
];

function judge(simEvents: NumberedSimEvent[], requests: ProxiedRequest[], released = new Map()) {
  return judgeSnapshots({ prefix: "cocoon", simEvents, requests, released });
}

Deno.test("snapshot guard: a manifest path names its VM and reference", () => {
  assert.deepEqual(manifestTarget("cocoon", `/v2/cocoon/${VM}/manifests/hibernate`), {
    vm: VM,
    ref: "hibernate",
  });
  assert.equal(manifestTarget("cocoon", "/v2/other/x/manifests/hibernate"), undefined);
  assert.equal(manifestTarget("cocoon", "/v2/"), undefined);
});

Deno.test("snapshot guard: deleting the held digest before the VM is restored is a violation", () => {
  const verdict = judge(hibernated(), [del(200, "hibernate", 400), del(201, D1)]);
  assert.equal(verdict.violations.length, 1);
  assert.match(verdict.violations[0].what, /needed it/);
  assert.throws(() => verdict.assertNone(), (err: Error) => {
    // The failure reads as the VM's timeline, push to delete.
    assert.match(err.message, /sim pushed ns\/demo-0/);
    assert.match(err.message, new RegExp(`registry DELETE .*${D1} → 202`));
    return true;
  });
});

Deno.test("snapshot guard: after a restore from the held digest the tag may go", () => {
  const events = [...hibernated(), ev(300, "ready", { digest: D1 })];
  const verdict = judge(events, [del(400, D1)]);
  assert.deepEqual(verdict.violations, []);
  assert.equal(verdict.restores, 1);
  assert.equal(verdict.hibernateDeletes, 1);
});

Deno.test("snapshot guard: once the owner is deleted the tag may go", () => {
  const verdict = judge(hibernated(), [del(400, D1)], new Map([[VM, 350]]));
  assert.deepEqual(verdict.violations, []);
});

Deno.test("snapshot guard: deleting a superseded digest is not deleting the held one", () => {
  const events = [
    ev(50, "pushed", { detail: `${VM}:hibernate`, digest: D2 }),
    ev(60, "ready", { digest: D2 }),
    ...hibernated(),
  ];
  // D2 was an earlier round's snapshot (restored from), replaced by D1 under the tag; dropping
  // D2 cannot lose D1.
  const verdict = judge(events, [del(200, D2)]);
  assert.deepEqual(verdict.violations.map((v) => v.what), []);
});

Deno.test("snapshot guard: a failed delete removes nothing", () => {
  const verdict = judge(hibernated(), [del(200, D1, 503)]);
  assert.deepEqual(verdict.violations, []);
  assert.equal(verdict.hibernateDeletes, 0);
});

Deno.test("snapshot guard: a VM that boots fresh or from another push while holding one lost its state", () => {
  const fresh = judge([...hibernated(), ev(300, "ready")], []);
  assert.match(fresh.violations[0]?.what ?? "", /booted fresh/);
  const other = judge([...hibernated(), ev(300, "ready", { digest: D2 })], []);
  assert.match(other.violations[0]?.what ?? "", /not from the snapshot/);
});

Deno.test("snapshot guard: a :latest delete is not a :hibernate delete", () => {
  const events = [...hibernated(), ev(120, "pushed", { detail: `${VM}:latest`, digest: D2 })];
  const verdict = judge(events, [del(200, D2)]);
  assert.deepEqual(verdict.violations, []);
  assert.equal(verdict.hibernateDeletes, 0);
});
