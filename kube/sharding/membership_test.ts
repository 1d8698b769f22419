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
