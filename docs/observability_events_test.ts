/**
 * The Event contract: every reason the Go operator records is still recorded with the same type,
 * and the Events table of docs/observability.md lists exactly the reasons the code records. The
 * Go list was written down from reading every Eventf call of the Go operator (cocoonset/,
 * hibernation/ at the mirrored HEAD); the port's reasons are found by reading its sources.
 */
import assert from "node:assert/strict";
import { REASON_MAIN_AGENT_FAILED, REASON_POD_LIFECYCLE_FAILED } from "../cocoonset/failed_main.ts";

const root = new URL("../", import.meta.url);

/** Reason → type of every Event the Go operator records. */
const GO_EVENTS: Record<string, "Normal" | "Warning"> = {
  // CocoonSet
  PodLifecycleFailed: "Warning",
  MainAgentFailed: "Warning",
  RecoveredFromFailure: "Normal",
  SubAgentRebuilding: "Normal",
  SubAgentDeadLetter: "Warning",
  WakeNoCapacity: "Warning",
  // CocoonHibernation
  Hibernated: "Normal",
  HibernateTimedOut: "Warning",
  WokenActive: "Normal",
  WakeTimedOut: "Warning",
  RetryRequested: "Normal",
};

/** Production sources that record Events. */
async function sources(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const dir of ["cocoonset", "hibernation"]) {
    for (const e of Deno.readDirSync(new URL(`${dir}/`, root))) {
      if (!e.name.endsWith(".ts") || e.name.endsWith("_test.ts") || e.name.startsWith("_")) {
        continue;
      }
      out.set(`${dir}/${e.name}`, await Deno.readTextFile(new URL(`${dir}/${e.name}`, root)));
    }
  }
  out.set("kube/leader.ts", await Deno.readTextFile(new URL("kube/leader.ts", root)));
  out.set(
    "kube/sharding/scope.ts",
    await Deno.readTextFile(new URL("kube/sharding/scope.ts", root)),
  );
  return out;
}

/**
 * Reason → type of every Event the sources record: a type literal followed by a reason that is
 * a literal, an exported REASON_* constant, or (the failed-main path) the `reason` variable that
 * podFailedReason fills.
 */
async function portEvents(): Promise<Map<string, Set<string>>> {
  const files = await sources();
  const constants = new Map<string, string>();
  for (const text of files.values()) {
    for (const m of text.matchAll(/export const (REASON_\w+) = "(\w+)"/g)) {
      constants.set(m[1], m[2]);
    }
  }
  const found = new Map<string, Set<string>>();
  const add = (reason: string, type: string) => {
    if (!found.has(reason)) found.set(reason, new Set());
    found.get(reason)!.add(type);
  };
  for (const [file, text] of files) {
    // The shard scope's hand-over Events: #announce(reason, type, …).
    for (const m of text.matchAll(/#announce\(\s*"(\w+)",\s*"(Normal|Warning)",/g)) add(m[1], m[2]);
    for (const m of text.matchAll(/"(Normal|Warning)",\s*("\w+"|\w+)\s*,/g)) {
      const token = m[2];
      if (token.startsWith('"')) add(token.slice(1, -1), m[1]);
      else if (constants.has(token)) add(constants.get(token)!, m[1]);
      else if (token === "reason" && file === "cocoonset/failed_main.ts") {
        add(REASON_POD_LIFECYCLE_FAILED, m[1]);
        add(REASON_MAIN_AGENT_FAILED, m[1]);
      } else assert.fail(`${file}: cannot resolve the Event reason ${token}`);
    }
  }
  return found;
}

async function documentedEvents(): Promise<Map<string, string>> {
  const text = await Deno.readTextFile(new URL("docs/observability.md", root));
  const section = text.slice(text.indexOf("## Events"), text.indexOf("## Metrics"));
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `(\w+)` +\| (Normal|Warning) +\|/gm)) rows.set(m[1], m[2]);
  return rows;
}

Deno.test("events contract: every Go Event reason is recorded with the Go type", async () => {
  const port = await portEvents();
  for (const [reason, type] of Object.entries(GO_EVENTS)) {
    assert.deepEqual(port.get(reason), new Set([type]), reason);
  }
});

Deno.test("events contract: docs/observability.md lists exactly the recorded reasons and types", async () => {
  const port = await portEvents();
  const docs = await documentedEvents();
  assert.deepEqual([...docs.keys()].sort(), [...port.keys()].sort());
  for (const [reason, types] of port) {
    assert.deepEqual(types, new Set([docs.get(reason)]), reason);
  }
  for (const [reason, type] of Object.entries(GO_EVENTS)) assert.equal(docs.get(reason), type);
});
