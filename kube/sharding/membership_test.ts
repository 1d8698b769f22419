import assert from "node:assert/strict";
import { Leases } from "../core.ts";
import { FakeClient } from "../testing/fake.ts";
import { FakeClock } from "../testing/fake_clock.ts";
import { flushMicrotasks } from "../testing/wait.ts";
import { HELD_ANNOTATION, MEMBER_GROUP_LABEL, memberLeaseName, ShardMember } from "./membership.ts";
import { FULL_RANGE, type RangeSet } from "./range.ts";
import { DEFAULT_SHARD_TIMING } from "./timing.ts";

const TIMING = DEFAULT_SHARD_TIMING;

function setup() {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const log: string[] = [];
  const record = (what: string) => (ranges: RangeSet) => {
    log.push(`${clock.now()} ${what} ${ranges.length}`);
  };
  const stop = new AbortController();
  const member = new ShardMember({
    client,
    clock,
    namespace: "ops",
    identity: "pod-a_1234",
    timing: TIMING,
    onStart: record("start"),
    onStop: record("stop"),
    onRelease: record("release"),
    onAbandon: record("abandon"),
  });
  const done = member.run(stop.signal);
  const pump = async (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      await flushMicrotasks();
    }
  };
  return { clock, client, log, stop, member, done, pump };
}

Deno.test("a lone member creates its labelled Lease, announces, then starts the whole space", async () => {
  const { client, member, pump, stop, done, log } = setup();
  await flushMicrotasks();
  await pump(TIMING.retryPeriodMs * 2 + 500);
  assert.deepEqual(member.state.active, [FULL_RANGE]);
  assert.equal(log.filter((l) => l.includes("start")).length, 1);
  const lease = await client.get(Leases, "ops", memberLeaseName("pod-a_1234"));
  assert.equal(lease.metadata.name, "cocoon-operator-shard-pod-a-1234");
  assert.equal(lease.metadata.labels?.[MEMBER_GROUP_LABEL], "cocoon-operator");
  assert.equal(lease.spec?.holderIdentity, "pod-a_1234");
  assert.equal(lease.spec?.leaseDurationSeconds, 15);
  assert.equal(
    lease.metadata.annotations?.[HELD_ANNOTATION],
    "0x0000000000000000-0x10000000000000000",
  );
  stop.abort();
  await pump(TIMING.retryPeriodMs * 3);
  await done;
  await assert.rejects(client.get(Leases, "ops", memberLeaseName("pod-a_1234")));
});

Deno.test("requests that hang: the deadline timer abandons the ranges at the renew deadline", async () => {
  const { client, member, pump, clock, log } = setup();
  await flushMicrotasks();
  await pump(TIMING.retryPeriodMs * 2 + 500);
  assert.deepEqual(member.state.active, [FULL_RANGE]);
  const lastRenewal = member.state.lastRenewalAt!;
  client.addReactor(() => new Promise<Error | undefined>(() => {})); // never answers
  await pump(TIMING.leaseDurationMs);
  const abandon = log.find((l) => l.includes("abandon"));
  assert.ok(abandon, log.join("\n"));
  const at = Number(abandon.split(" ")[0]);
  assert.ok(at - lastRenewal <= TIMING.renewDeadlineMs, `abandoned ${at - lastRenewal} ms after`);
  assert.ok(at - lastRenewal < TIMING.leaseDurationMs);
  assert.deepEqual(member.state.active, []);
  void clock;
});

/** A member Lease as another process would have written it (fresh: renewed at `at`). */
function otherLease(identity: string, held: string, at: number) {
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: memberLeaseName(identity),
      namespace: "ops",
      labels: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
      annotations: { [HELD_ANNOTATION]: held },
    },
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds: 15,
      renewTime: new Date(at).toISOString(),
    },
  };
}

const WHOLE = "0x0000000000000000-0x10000000000000000";

/** One member with the given identity (and POD_NAME), plus the deletes it sends. */
function startMember(identity: string, podName?: string) {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient({ clock });
  const deletes: { at: number; name: string; resourceVersion?: string }[] = [];
  client.addReactor((a) => {
    if (a.verb === "delete" && a.resource === Leases) {
      deletes.push({
        at: clock.now(),
        name: a.name ?? "",
        resourceVersion: a.deleteOptions?.preconditions?.resourceVersion,
      });
    }
    return undefined;
  });
  const deleted: string[] = [];
  const stop = new AbortController();
  const noop = () => {};
  const member = new ShardMember({
    client,
    clock,
    namespace: "ops",
    identity,
    podName,
    timing: TIMING,
    onStart: noop,
    onStop: noop,
    onRelease: noop,
    onAbandon: noop,
    onDeadLeaseDeleted: (id, reason) => deleted.push(`${id} ${reason}`),
  });
  const run = () => member.run(stop.signal);
  const pump = async (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      await flushMicrotasks();
    }
  };
  return { clock, client, deletes, deleted, stop, member, run, pump };
}

const exists = (client: FakeClient, name: string | undefined) =>
  client.get(Leases, "ops", name ?? "").then(() => true, () => false);

Deno.test("a dead member's Lease is deleted once expired past margin and retention, held to the version seen", async () => {
  const m = startMember("pod-a_1234");
  const dead = await m.client.create(Leases, otherLease("pod-z_dead", WHOLE, m.clock.now()));
  const done = m.run();
  await flushMicrotasks();
  const firstSeen = m.clock.now();
  // Blocking (live, then expired within the margin): kept, and the space stays blocked.
  const blockingFor = TIMING.leaseDurationMs + TIMING.expiryMarginMs;
  await m.pump(blockingFor - TIMING.retryPeriodMs);
  assert.equal(await exists(m.client, dead.metadata.name), true, "kept while it blocks");
  assert.deepEqual(m.member.state.active, [], "it blocks the whole space");
  // Past the margin: the space is taken over, the Lease kept for the retention.
  const keepFor = blockingFor + TIMING.deadLeaseRetentionMs!;
  await m.pump(keepFor - blockingFor);
  assert.deepEqual(m.member.state.active, [FULL_RANGE]);
  assert.equal(await exists(m.client, dead.metadata.name), true, "kept for the retention");
  assert.equal(m.deletes.length, 0);
  await m.pump(TIMING.retryPeriodMs * 3);
  assert.equal(await exists(m.client, dead.metadata.name), false, "deleted");
  assert.equal(m.deletes.length, 1);
  assert.equal(m.deletes[0].name, dead.metadata.name);
  assert.equal(m.deletes[0].resourceVersion, dead.metadata.resourceVersion);
  assert.ok(m.deletes[0].at >= firstSeen + keepFor, `deleted ${m.deletes[0].at - firstSeen} ms in`);
  assert.deepEqual(m.deleted, ["pod-z_dead expired"]);
  m.stop.abort();
  await m.pump(TIMING.retryPeriodMs * 3);
  await done;
});

Deno.test("a dead member's Lease renewed between the list and the delete is not deleted", async () => {
  const m = startMember("pod-a_1234");
  const dead = await m.client.create(Leases, otherLease("pod-z_dead", "", m.clock.now()));
  let renewed = false;
  m.client.addReactor(async (a) => {
    if (a.verb === "delete" && a.name === dead.metadata.name && !renewed) {
      renewed = true; // its holder comes back just before the delete lands
      const current = await m.client.get(Leases, "ops", dead.metadata.name);
      await m.client.update(Leases, {
        ...current,
        spec: { ...current.spec, renewTime: new Date(m.clock.now()).toISOString() },
      });
    }
    return undefined;
  });
  const done = m.run();
  await m.pump(
    TIMING.leaseDurationMs + TIMING.expiryMarginMs + TIMING.deadLeaseRetentionMs! + 4000,
  );
  assert.ok(renewed, "a delete was sent");
  assert.equal(await exists(m.client, dead.metadata.name), true, "the renewed Lease stays");
  assert.deepEqual(m.deleted, []);
  const view = m.member.members.find((v) => v.identity === "pod-z_dead");
  assert.equal(view?.live, true, "and counts as live again");
  m.stop.abort();
  await m.pump(TIMING.retryPeriodMs * 3);
  await done;
});

Deno.test("with POD_NAME, this pod's previous process's Lease is ignored at once and deleted", async () => {
  const m = startMember("pod-a_new", "pod-a");
  const old = await m.client.create(Leases, otherLease("pod-a_old", WHOLE, m.clock.now()));
  const done = m.run();
  await flushMicrotasks();
  // A claim round and an activation round, far less than the old Lease's duration.
  await m.pump(TIMING.retryPeriodMs * 2 + 500);
  assert.deepEqual(m.member.state.active, [FULL_RANGE]);
  assert.equal(await exists(m.client, old.metadata.name), false, "the predecessor's Lease is gone");
  assert.deepEqual(m.deletes.map((d) => [d.name, d.resourceVersion]), [
    [old.metadata.name, old.metadata.resourceVersion],
  ]);
  assert.deepEqual(m.deleted, ["pod-a_old predecessor"]);
  m.stop.abort();
  await m.pump(TIMING.retryPeriodMs * 3);
  await done;
});

Deno.test("without POD_NAME (identity from HOSTNAME) a same-prefix Lease blocks as any live member", async () => {
  const m = startMember("pod-a_new");
  const old = await m.client.create(Leases, otherLease("pod-a_old", WHOLE, m.clock.now()));
  const done = m.run();
  await flushMicrotasks();
  await m.pump(TIMING.retryPeriodMs * 3);
  assert.deepEqual(m.member.state.active, []);
  assert.equal(await exists(m.client, old.metadata.name), true);
  assert.equal(m.deletes.length, 0);
  m.stop.abort();
  await m.pump(TIMING.retryPeriodMs * 3);
  await done;
});

Deno.test("a POD_NAME the identity was not made from is refused", () => {
  const noop = () => {};
  assert.throws(
    () =>
      new ShardMember({
        client: new FakeClient(),
        namespace: "ops",
        identity: "pod-b_1",
        podName: "pod-a",
        onStart: noop,
        onStop: noop,
        onRelease: noop,
        onAbandon: noop,
      }),
    /identity "pod-b_1" is not made from POD_NAME "pod-a"/,
  );
});
