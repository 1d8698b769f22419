/**
 * VM names two namespaces share (`team` / `x-prod-0` and `team-x` / `prod-0` both make
 * `vk-team-x-prod-0`): the second comer creates nothing under the name, says so, and converges
 * everywhere else.
 */
import assert from "node:assert/strict";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { CocoonSets } from "../common/apis/v1/resources.ts";
import { CONDITION_TYPE_READY } from "../common/k8s/condition.ts";
import { parseVMSpec } from "../common/meta/mod.ts";
import { isNotFound, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import {
  conditionOf,
  livePod,
  newCocoonSet,
  newTestEnv,
  type TestEnv,
  withFinalizer,
} from "./_test_support.ts";
import { REASON_VM_NAME_CONFLICT } from "./vm_collision.ts";

function setIn(
  ns: string,
  name: string,
  created: string,
  ...mods: ((cs: CocoonSet) => void)[]
): CocoonSet {
  return newCocoonSet(name, withFinalizer, (cs) => {
    cs.metadata.namespace = ns;
    cs.metadata.uid = `uid-${ns}-${name}`;
    cs.metadata.creationTimestamp = created;
  }, ...mods);
}

async function podIn(env: TestEnv, ns: string, name: string): Promise<Pod | undefined> {
  try {
    return await env.fake.get(Pods, ns, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function pass(env: TestEnv, ns: string, name: string): Promise<void> {
  await env.reconciler.reconcile({ namespace: ns, name }, new AbortController().signal);
}

Deno.test("vm name collision: the second comer's main is not created; Ready=False and a Warning name both", async () => {
  const env = newTestEnv();
  env.fake.seed(CocoonSets, setIn("team", "x-prod", "2026-05-14T00:00:00Z"));
  env.fake.seed(CocoonSets, setIn("team-x", "prod", "2026-05-14T00:01:00Z"));
  // The second comer's pass first, before the first comer has any pod: the set alone holds it.
  for (let i = 0; i < 3; i++) await pass(env, "team-x", "prod");
  for (let i = 0; i < 3; i++) await pass(env, "team", "x-prod");
  const first = await podIn(env, "team", "x-prod-0");
  assert.equal(first !== undefined && parseVMSpec(first).vmName, "vk-team-x-prod-0");
  assert.equal(await podIn(env, "team-x", "prod-0"), undefined, "no second VM under the name");
  const loser = await env.fake.get(CocoonSets, "team-x", "prod");
  const ready = conditionOf(loser, CONDITION_TYPE_READY);
  assert.equal(ready?.status, "False");
  assert.equal(ready?.reason, REASON_VM_NAME_CONFLICT);
  const warnings = env.recorder.withReason(REASON_VM_NAME_CONFLICT);
  assert.ok(warnings.length > 0);
  assert.equal(warnings[0].type, "Warning");
  assert.match(warnings[0].message, /vk-team-x-prod-0/);
  assert.match(warnings[0].message, /CocoonSet team\/x-prod/);
  assert.match(warnings[0].message, /team-x\/prod/);
});

Deno.test("vm name collision: only the colliding toolbox is refused, the rest of the set converges", async () => {
  const env = newTestEnv();
  // team-x/prod came first and runs vk-team-x-prod-0; team/x's toolbox prod-0 derives it too.
  env.fake.seed(CocoonSets, setIn("team-x", "prod", "2026-05-14T00:00:00Z"));
  for (let i = 0; i < 3; i++) await pass(env, "team-x", "prod");
  assert.ok(await podIn(env, "team-x", "prod-0"));
  env.fake.seed(
    CocoonSets,
    setIn("team", "x", "2026-05-14T00:01:00Z", (cs) => {
      cs.spec.toolboxes = [{ name: "prod-0", image: "img" }, { name: "db", image: "img" }];
    }),
  );
  await pass(env, "team", "x");
  const main = await podIn(env, "team", "x-0");
  assert.ok(main, "the main of the second comer is created");
  // vk-cocoon runs it (seed keeps the status, as vk-cocoon's status write would).
  env.fake.seed(Pods, livePod(main));
  for (let i = 0; i < 4; i++) await pass(env, "team", "x");
  assert.ok(await podIn(env, "team", "x-db"), "its other toolbox too");
  assert.equal(await podIn(env, "team", "x-prod-0"), undefined);
  const warnings = env.recorder.withReason(REASON_VM_NAME_CONFLICT);
  assert.ok(
    warnings.some((w) => /toolbox prod-0/.test(w.message) && /pod team-x\/prod-0/.test(w.message)),
  );
});
