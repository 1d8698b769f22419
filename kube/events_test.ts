import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import { type CoreEvent, Events, Namespaces, type Pod, Pods } from "./core.ts";
import { newApiError } from "./errors.ts";
import { EventCorrelator, objectReference, Recorder, sprintf } from "./events.ts";
import { FakeClient } from "./testing/fake.ts";

const start = Date.parse("2026-01-01T00:00:00Z");

function pod(name = "demo-0", namespace = "ns"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: "42" },
  };
}

async function events(client: FakeClient, namespace = "ns"): Promise<CoreEvent[]> {
  return (await client.list(Events, { namespace })).items;
}

function setup(opts: { latencyMs?: number } = {}) {
  const client = new FakeClient({ latencyMs: opts.latencyMs });
  const clock = new FakeClock(start);
  const recorder = new Recorder({ client, component: "cocoon-operator", clock, random: () => 0 });
  return { client, clock, recorder };
}

Deno.test("an Event names its involved object like client-go", async () => {
  const { client, recorder } = setup();
  recorder.event(pod(), "Warning", "SubAgentDeadLetter", "slot 1 exhausted");
  await recorder.close();
  const [ev] = await events(client);
  assert.match(ev.metadata.name ?? "", /^demo-0\.[0-9a-f]+$/);
  assert.equal(
    ev.metadata.name,
    `demo-0.${(BigInt(start) * 1_000_000n).toString(16)}`,
    "suffix is the unix time in nanoseconds, hex",
  );
  assert.equal(ev.metadata.namespace, "ns");
  assert.deepEqual(ev.involvedObject, {
    apiVersion: "v1",
    kind: "Pod",
    name: "demo-0",
    namespace: "ns",
    uid: "uid-demo-0",
    resourceVersion: "42",
  });
  assert.equal(ev.type, "Warning");
  assert.equal(ev.reason, "SubAgentDeadLetter");
  assert.equal(ev.message, "slot 1 exhausted");
  assert.equal(ev.count, 1);
  assert.equal(ev.firstTimestamp, "2026-01-01T00:00:00Z");
  assert.equal(ev.lastTimestamp, "2026-01-01T00:00:00Z");
  assert.deepEqual(ev.source, { component: "cocoon-operator" });
  assert.equal(ev.reportingComponent, "cocoon-operator");
});

Deno.test("cluster-scoped objects get Events in 'default'; ResourceType fills in the kind", async () => {
  const { client, recorder } = setup();
  recorder.event(
    { object: { metadata: { name: "ns1", uid: "u1" } }, resource: Namespaces },
    "Normal",
    "Seen",
    "hello",
  );
  await recorder.close();
  const [ev] = await events(client, "default");
  assert.deepEqual(ev.involvedObject, {
    apiVersion: "v1",
    kind: "Namespace",
    name: "ns1",
    uid: "u1",
  });
  assert.equal(ev.metadata.namespace, "default");
  assert.deepEqual(
    objectReference({ object: { metadata: { name: "p", namespace: "x" } }, resource: Pods }),
    {
      apiVersion: "v1",
      kind: "Pod",
      name: "p",
      namespace: "x",
    },
  );
});

Deno.test("ten identical Events become one object with count 10", async () => {
  const { client, clock, recorder } = setup();
  for (let i = 0; i < 10; i++) {
    recorder.event(pod(), "Normal", "SubAgentRebuilding", "slot 1 attempt 1/4");
    clock.advance(1500);
    await recorder.flush();
  }
  await recorder.close();
  const all = await events(client);
  assert.equal(all.length, 1);
  assert.equal(all[0].count, 10);
  assert.equal(all[0].firstTimestamp, "2026-01-01T00:00:00Z");
  assert.equal(all[0].lastTimestamp, "2026-01-01T00:00:13Z");
  const verbs = client.actions.filter((a) => a.resource === Events).map((a) => a.verb);
  assert.deepEqual(verbs.slice(0, 10), ["create", ...Array(9).fill("patch")]);
});

Deno.test("identical Events recorded in one burst are still counted on one object", async () => {
  const { client, recorder } = setup();
  for (let i = 0; i < 5; i++) recorder.event(pod(), "Normal", "Same", "same message");
  await recorder.close();
  const all = await events(client);
  assert.equal(all.length, 1);
  assert.equal(all[0].count, 5);
});

Deno.test("different messages are distinct Events until ten similar ones are combined", async () => {
  const { client, clock, recorder } = setup();
  for (let i = 1; i <= 9; i++) {
    recorder.event(pod(), "Normal", "Progress", `step ${i}`);
    clock.advance(1000);
  }
  await recorder.flush();
  let all = await events(client);
  assert.equal(all.length, 9);
  assert.deepEqual(all.map((e) => e.count), Array(9).fill(1));

  recorder.event(pod(), "Normal", "Progress", "step 10");
  clock.advance(1000);
  recorder.event(pod(), "Normal", "Progress", "step 11");
  // Another reason on the same object is aggregated separately.
  recorder.event(pod(), "Normal", "Other", "unrelated");
  await recorder.close();
  all = await events(client);
  assert.equal(all.length, 11);
  const combined = all.filter((e) => e.message?.startsWith("(combined from similar events): "));
  assert.equal(combined.length, 1);
  assert.equal(combined[0].message, "(combined from similar events): step 11");
  assert.equal(combined[0].count, 2);
  assert.equal(combined[0].reason, "Progress");
  assert.ok(all.some((e) => e.reason === "Other" && e.message === "unrelated"));
});

Deno.test("similar Events spread over more than ten minutes are not combined", async () => {
  const { client, clock, recorder } = setup();
  for (let i = 1; i <= 12; i++) {
    recorder.event(pod(), "Normal", "Progress", `step ${i}`);
    await recorder.flush();
    clock.advance(11 * 60_000);
  }
  await recorder.close();
  const all = await events(client);
  assert.equal(all.length, 12);
  assert.ok(all.every((e) => !e.message?.includes("combined")));
});

Deno.test("spam filter: burst of 25 per object, then one token per 5 minutes", () => {
  const clock = new FakeClock(start);
  const correlator = new EventCorrelator(clock);
  const ref = objectReference(pod());
  const mk = (reason: string): CoreEvent => ({
    metadata: { name: `demo-0.${reason}`, namespace: "ns" },
    involvedObject: ref,
    reason,
    message: "m",
    type: "Normal",
    source: { component: "cocoon-operator" },
    count: 1,
  });
  const skipped = Array.from({ length: 30 }, (_, i) => correlator.correlate(mk(`r${i}`)).skip);
  assert.deepEqual(skipped, [...Array(25).fill(false), ...Array(5).fill(true)]);
  // Another object has its own bucket.
  const other = { ...mk("x"), involvedObject: objectReference(pod("demo-1")) };
  assert.equal(correlator.correlate(other).skip, false);
  clock.advance(299_000);
  assert.equal(correlator.correlate(mk("late")).skip, true);
  clock.advance(1_000);
  assert.equal(correlator.correlate(mk("later")).skip, false);
  assert.equal(correlator.correlate(mk("again")).skip, true);
});

Deno.test("a patch that finds the Event gone creates it again", async () => {
  const { client, clock, recorder } = setup();
  recorder.event(pod(), "Normal", "Again", "same");
  await recorder.flush();
  const [first] = await events(client);
  await client.delete(Events, "ns", first.metadata.name ?? "");
  clock.advance(2000);
  recorder.event(pod(), "Normal", "Again", "same");
  await recorder.close();
  const all = await events(client);
  assert.equal(all.length, 1);
  assert.equal(all[0].metadata.name, first.metadata.name);
  assert.equal(all[0].count, 2);
  assert.equal(all[0].lastTimestamp, "2026-01-01T00:00:02Z");
});

Deno.test("transport errors are retried after a pause; server rejections are not", async () => {
  const { client, clock, recorder } = setup();
  let failures = 2;
  client.addReactor((a) => {
    if (a.resource !== Events || a.verb !== "create") return undefined;
    if (a.object?.metadata.name?.startsWith("flaky") && failures > 0) {
      failures--;
      return new TypeError("connection reset");
    }
    if (a.object?.metadata.name?.startsWith("denied")) {
      return newApiError(403, "Forbidden", { resource: "events", namespace: "ns" }, "nope");
    }
    return undefined;
  });
  recorder.event(pod("denied"), "Normal", "R", "m");
  recorder.event(pod("flaky"), "Normal", "R", "m");
  const flushed = recorder.flush();
  // Drive the retry pauses (first pause random·10 s = 0 here, then 10 s).
  for (let i = 0; i < 50 && failures > 0; i++) {
    await new Promise((r) => setTimeout(r, 0));
    clock.advance(10_000);
  }
  for (let i = 0; i < 50 && (await events(client)).length === 0; i++) {
    await new Promise((r) => setTimeout(r, 0));
    clock.advance(10_000);
  }
  await flushed;
  const all = await events(client);
  assert.deepEqual(all.map((e) => e.involvedObject.name), ["flaky"]);
  const deniedCreates = client.actions.filter((a) =>
    a.verb === "create" && a.object?.metadata.name?.startsWith("denied")
  );
  assert.equal(deniedCreates.length, 1, "no retry after a server rejection");
  await recorder.close();
});

Deno.test("event() never blocks on a slow API and never throws", async () => {
  const { client, recorder } = setup({ latencyMs: 10 });
  for (let i = 0; i < 20; i++) recorder.event(pod(`p${i}`), "Normal", "Slow", "m");
  // Nothing has reached the API yet: the calls above only queued.
  assert.equal(client.actions.length, 0);
  // Bad input is logged and dropped, not thrown.
  recorder.event({ metadata: { name: "nokind" } }, "Normal", "R", "m");
  recorder.event(pod(), "Bogus" as "Normal", "R", "m");
  await recorder.close();
  assert.equal((await events(client)).length, 20);
  recorder.event(pod(), "Normal", "AfterClose", "m");
  await recorder.flush();
  assert.equal((await events(client)).length, 20);
});

Deno.test("a full queue drops new Events instead of growing", async () => {
  const client = new FakeClient({ latencyMs: 20 });
  const recorder = new Recorder({
    client,
    component: "c",
    queueSize: 3,
    clock: new FakeClock(start),
  });
  for (let i = 0; i < 10; i++) recorder.event(pod(`p${i}`), "Normal", "R", "m");
  assert.equal(recorder.dropped, 7);
  await recorder.close();
  assert.equal((await events(client)).length, 3);
});

Deno.test("eventf formats Go-style verbs", async () => {
  assert.equal(sprintf("slot %d attempt %d/%d", [1, 2, 4]), "slot 1 attempt 2/4");
  assert.equal(
    sprintf("pod %s: %v (%q) 100%%", ["a", new Error("boom"), "x"]),
    'pod a: boom ("x") 100%',
  );
  assert.equal(sprintf("%s %s", ["a"]), "a %!s(MISSING)");
  const { client, recorder } = setup();
  recorder.eventf(pod(), "Normal", "Fmt", "slot %d of %s", 3, "demo");
  await recorder.close();
  assert.equal((await events(client))[0].message, "slot 3 of demo");
});

Deno.test("close(timeout) abandons writes to a hung API server instead of waiting forever", async () => {
  const clock = new FakeClock(start);
  let calls = 0;
  // An API server that accepts the connection and never answers (a blackholed network).
  const hung = new Promise<never>(() => {});
  const client = {
    create: () => {
      calls++;
      return hung;
    },
    patch: () => hung,
  } as unknown as FakeClient;
  const recorder = new Recorder({ client, component: "cocoon-operator", clock, random: () => 0 });
  recorder.event(pod("a"), "Normal", "Started", "one");
  recorder.event(pod("b"), "Normal", "Started", "two");
  recorder.event(pod("c"), "Normal", "Started", "three");
  let closed = false;
  const closing = recorder.close(5_000).then(() => closed = true);
  // Let the writer reach the first hung request.
  for (let i = 0; i < 10 && calls === 0; i++) await new Promise((r) => setTimeout(r, 0));
  assert.equal(calls, 1);
  clock.advance(4_999);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(closed, false, "waits up to the timeout");
  clock.advance(1);
  await closing;
  // The Events still queued were given up on without another hung request each.
  assert.equal(calls, 1);
  assert.equal(clock.pendingTimers(), 0);
});
