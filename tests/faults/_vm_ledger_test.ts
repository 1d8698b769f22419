import assert from "node:assert/strict";
import type { NumberedSimEvent, SimEvent } from "../../sim/events.ts";
import { judgeVmUniqueness } from "./_vm_ledger.ts";

let seq = 0;
function ev(type: SimEvent["type"], name: string, vmName = `vk-ns-${name}`): NumberedSimEvent {
  return { seq: ++seq, at: seq, type, namespace: "ns", name, vmName };
}

Deno.test("vm ledger: one VM per name through boot, hibernate, wake and delete", () => {
  const verdict = judgeVmUniqueness([
    ev("ready", "demo-0"),
    ev("hibernated", "demo-0"),
    ev("ready", "demo-0"),
    ev("finalized", "demo-0"),
    ev("ready", "demo-0"),
  ]);
  assert.deepEqual(verdict.violations, []);
  assert.equal(verdict.starts, 3);
});

Deno.test("vm ledger: a second VM for a name that is up is a violation", () => {
  const twice = judgeVmUniqueness([ev("ready", "demo-0"), ev("ready", "demo-0")]);
  assert.equal(twice.violations.length, 1);
  const other = judgeVmUniqueness([
    ev("ready", "demo-0", "vk-ns-x"),
    ev("ready", "demo-1", "vk-ns-x"),
  ]);
  assert.match(other.violations[0]?.what ?? "", /already up for ns\/demo-0/);
  assert.throws(() => other.assertNone(), /a VM name ran twice/);
});

Deno.test("vm ledger: another pod's end does not end this pod's VM", () => {
  const verdict = judgeVmUniqueness([
    ev("ready", "demo-0", "vk-ns-x"),
    ev("finalized", "demo-1", "vk-ns-x"),
    ev("ready", "demo-2", "vk-ns-x"),
  ]);
  assert.equal(verdict.violations.length, 1);
});
