import assert from "node:assert/strict";
import {
  COCOON_HIBERNATION_PHASE_HIBERNATED,
  COCOON_HIBERNATION_PHASE_PENDING,
  CocoonHibernations,
} from "../common/apis/v1/mod.ts";
import { Events, Recorder } from "../kube/mod.ts";
import { FakeClient, FakeClock } from "../kube/testing/mod.ts";
import { at, NS, ready, request, T0, VM } from "./_fixtures.ts";
import { PhaseTransitions } from "./transitions.ts";

function setup(obj: ReturnType<typeof request>) {
  const clock = new FakeClock(T0);
  const api = new FakeClient({ clock });
  const stored = api.seed(CocoonHibernations, obj);
  const recorder = new Recorder({ client: api, component: "cocoon-operator" });
  return { api, stored, recorder, t: new PhaseTransitions({ client: api, recorder, clock }) };
}

Deno.test("enter rewrites observedGeneration even when the phase stays", async () => {
  const { api, stored, recorder, t } = setup(request("hib", "Hibernate", {
    generation: 7,
    status: {
      phase: COCOON_HIBERNATION_PHASE_HIBERNATED,
      vmName: VM,
      observedGeneration: 6,
      conditions: [ready("True", "Done", at(-1000), "Hibernated")],
    },
  }));
  await t.enter(stored, COCOON_HIBERNATION_PHASE_HIBERNATED, VM, new AbortController().signal);
  const got = await api.get(CocoonHibernations, NS, "hib");
  assert.equal(got.status?.observedGeneration, 7);
  assert.equal(got.status?.conditions?.[0].lastTransitionTime, at(-1000), "no flip, same clock");
  await recorder.flush();
  assert.equal((await api.list(Events)).items.length, 0, "no transition, no Event");
  await recorder.close();
});

Deno.test("pending rewrites observedGeneration even when the message is unchanged", async () => {
  const msg = "pod ns/demo-0 not yet present";
  const { api, stored, recorder, t } = setup(request("hib", "Hibernate", {
    generation: 4,
    status: {
      phase: COCOON_HIBERNATION_PHASE_PENDING,
      observedGeneration: 3,
      conditions: [ready("False", "Pending", at(-1000), msg)],
    },
  }));
  await t.pending(stored, msg, new AbortController().signal);
  assert.equal((await api.get(CocoonHibernations, NS, "hib")).status?.observedGeneration, 4);
  await recorder.close();
});

Deno.test("a status write carries the resourceVersion it was computed from", async () => {
  const { api, stored, recorder, t } = setup(request("hib", "Hibernate"));
  await t.pending(stored, "waiting", new AbortController().signal);
  const patch = api.actions.find((a) => a.verb === "patch" && a.subresource === "status");
  const body = patch?.patch as { metadata?: { resourceVersion?: string } };
  assert.ok(body.metadata?.resourceVersion, "optimistic lock sent");
  await recorder.close();
});
