import assert from "node:assert/strict";
import { Leases } from "../core.ts";
import { FakeClient } from "../testing/fake.ts";
import { waitFor } from "../testing/wait.ts";
import { fnv1a64 } from "./hash.ts";
import { HELD_ANNOTATION, MEMBER_GROUP_LABEL, memberLeaseName } from "./membership.ts";
import { formatRangeSet, FULL_RANGE, HASH_SPACE_END } from "./range.ts";
import { ShardScope } from "./scope.ts";
import { shardHandovers } from "./metrics.ts";
import type { EventRecorder } from "../events.ts";
import type { ShardTiming } from "./timing.ts";

const HALF = HASH_SPACE_END / 2n;
/** A namespace in the lower half: the part a joining smaller identity takes. */
const lowerNamespace = ["alpha", "bravo", "charlie", "delta"].map((n) => `shard-${n}`).find((ns) =>
  fnv1a64(ns) < HALF
)!;

function timing(drainTimeoutMs: number): ShardTiming {
  return {
    leaseDurationMs: 2_000,
    renewDeadlineMs: 1_500,
    retryPeriodMs: 200,
    expiryMarginMs: 300,
    drainTimeoutMs,
  };
}

/** A peer member with a smaller identity that announces nothing and keeps renewing. */
async function joinPeer(client: FakeClient): Promise<() => void> {
  let lease = await client.create(Leases, {
    metadata: {
      name: memberLeaseName("a-peer"),
      namespace: "ops",
      labels: { [MEMBER_GROUP_LABEL]: "cocoon-operator" },
      annotations: { [HELD_ANNOTATION]: "" },
    },
    spec: { holderIdentity: "a-peer", leaseDurationSeconds: 2 },
  });
  const timer = setInterval(async () => {
    lease = await client.update(Leases, {
      ...lease,
      spec: { ...lease.spec, renewTime: new Date().toISOString() },
    });
  }, 150);
  return () => clearInterval(timer);
}

async function held(client: FakeClient, identity: string): Promise<string> {
  const lease = await client.get(Leases, "ops", memberLeaseName(identity));
  return lease.metadata.annotations?.[HELD_ANNOTATION] ?? "";
}

/** Waits until the member's Lease has been written n more times (n more rounds). */
async function renewals(client: FakeClient, identity: string, n: number): Promise<void> {
  const seen = new Set<string>();
  await waitFor(
    `${n} renewals of ${identity}`,
    async () => {
      const lease = await client.get(Leases, "ops", memberLeaseName(identity));
      seen.add(lease.metadata.resourceVersion ?? "");
      return seen.size > n;
    },
    10_000,
    20,
  );
}

/** Records Events as "kind/name reason: message". */
function recordingRecorder(): { recorder: EventRecorder; events: string[] } {
  const events: string[] = [];
  const recorder: EventRecorder = {
    event: (subject, _type, reason, message) => {
      const obj = "object" in subject ? subject.object : subject;
      events.push(`${obj.kind}/${obj.metadata.name} ${reason}: ${message}`);
    },
    eventf: () => {},
  };
  return { recorder, events };
}

async function handovers(direction: string): Promise<number> {
  const { values } = await shardHandovers.get();
  return values.find((v) => v.labels.direction === direction)?.value ?? 0;
}

Deno.test("a draining range is released only once its in-flight reconcile ends", async () => {
  const client = new FakeClient();
  const { recorder, events } = recordingRecorder();
  const scope = new ShardScope({
    client,
    namespace: "ops",
    identity: "b-me",
    timing: timing(60_000),
    recorder,
  });
  const releasedBefore = await handovers("released");
  const stop = new AbortController();
  const run = scope.run(stop.signal);
  let stopPeer = () => {};
  try {
    await waitFor("whole space active", () => scope.holds(lowerNamespace), 10_000);
    const ticket = scope.admit(lowerNamespace);
    assert.ok(ticket, "admitted while held");
    stopPeer = await joinPeer(client);
    await waitFor("no new work in the lower half", () => !scope.holds(lowerNamespace), 10_000);
    assert.equal(scope.admit(lowerNamespace), undefined, "refused once draining");
    // Five renewals later the lower half is still announced: the reconcile is in flight.
    await renewals(client, "b-me", 5);
    assert.equal(await held(client, "b-me"), formatRangeSet([FULL_RANGE]));
    assert.equal(ticket.signal.aborted, false);
    ticket.done();
    await waitFor(
      "lower half released after the reconcile ended",
      async () =>
        (await held(client, "b-me")) === formatRangeSet([{ start: HALF, end: HASH_SPACE_END }]),
      10_000,
    );
    await waitFor("released counted", async () => (await handovers("released")) > releasedBefore);
    const lease = `Lease/${memberLeaseName("b-me")}`;
    const half = formatRangeSet([{ start: 0n, end: HALF }]);
    assert.deepEqual(events.map((e) => e.split(":")[0]), [
      `${lease} ShardAcquired`,
      `${lease} ShardDraining`,
      `${lease} ShardReleased`,
    ]);
    assert.match(events[1], new RegExp(`b-me draining ${half} \\(members: a-peer, b-me\\)`));
  } finally {
    stopPeer();
    stop.abort();
    await run;
  }
});

Deno.test("a drain that times out releases the range and aborts the reconcile still running", async () => {
  const client = new FakeClient();
  const scope = new ShardScope({ client, namespace: "ops", identity: "b-me", timing: timing(800) });
  const stop = new AbortController();
  const run = scope.run(stop.signal);
  let stopPeer = () => {};
  try {
    await waitFor("whole space active", () => scope.holds(lowerNamespace), 10_000);
    const ticket = scope.admit(lowerNamespace)!;
    stopPeer = await joinPeer(client);
    await waitFor("in-flight reconcile aborted", () => ticket.signal.aborted, 10_000);
    await waitFor(
      "lower half released",
      async () =>
        (await held(client, "b-me")) === formatRangeSet([{ start: HALF, end: HASH_SPACE_END }]),
      10_000,
    );
    ticket.done();
  } finally {
    stopPeer();
    stop.abort();
    await run;
  }
});
