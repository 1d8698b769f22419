/**
 * Fixtures shared by the issue-19 unit tests (limits, quota, outcome, isolation): a set whose main
 * is live, pods made Ready or failed by hand, and an API server that refuses creates of one pod
 * name with the answer a real one gives (Invalid, or a ResourceQuota's Forbidden).
 */
import { newApiError, Pods } from "../kube/mod.ts";
import type { Pod } from "../kube/mod.ts";
import type { FakeAction } from "../kube/testing/mod.ts";
import type { CocoonSet } from "../common/apis/v1/cocoonset_types.ts";
import { livePod, newCocoonSet, TEST_NAMESPACE, type TestEnv } from "./_test_support.ts";
import { buildAgentPod, buildToolboxPod } from "./pods.ts";

/** The message kube-apiserver's quota admission gives (quota "q1" full on pods). */
export function quotaMessage(pod: string): string {
  return `pods "${pod}" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=3, ` +
    "limited: pods=3";
}

/** Creates of pod `name` (dry-run and real) are refused: invalid, or by quota q1. */
export function refuseCreates(
  env: TestEnv,
  name: string,
  how: "invalid" | "quota",
  opts: { realOnly?: boolean } = {},
): () => void {
  return env.fake.addReactor((a: FakeAction) => {
    if (a.verb !== "create" || a.resource !== Pods || a.name !== name) return undefined;
    if (opts.realOnly && a.dryRun) return undefined;
    const target = { resource: "pods", namespace: a.namespace, name };
    return how === "invalid"
      ? newApiError(422, "Invalid", target, `Pod "${name}" is invalid: spec: Invalid value`)
      : newApiError(403, "Forbidden", target, quotaMessage(name));
  });
}

/** A set at generation 1 with a live main on node-a, plus the live pods the caller lists. */
export function liveSet(
  name: string,
  opts: { replicas?: number; liveSlots?: number[]; toolboxes?: string[]; liveToolboxes?: string[] },
  ...mods: ((cs: CocoonSet) => void)[]
): { cs: CocoonSet; pods: Pod[] } {
  const cs = newCocoonSet(name, (c) => {
    c.metadata.generation = 1;
    c.spec.agent.replicas = opts.replicas ?? 0;
    if (opts.toolboxes) c.spec.toolboxes = opts.toolboxes.map((tb) => ({ name: tb, image: "img" }));
  }, ...mods);
  const pods = [livePod(buildAgentPod(cs, 0))];
  for (const slot of opts.liveSlots ?? []) {
    pods.push(livePod(buildAgentPod(cs, slot, `vk-${TEST_NAMESPACE}-${name}-0`, "node-a")));
  }
  for (const tb of opts.liveToolboxes ?? []) {
    pods.push(livePod(buildToolboxPod(cs, cs.spec.toolboxes!.find((t) => t.name === tb)!)));
  }
  return { cs, pods };
}

/** Stored pod names that are not terminating, sorted. */
export async function livePodNames(env: TestEnv): Promise<string[]> {
  const pods = (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items;
  return pods.filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name!).sort();
}

/** The kubelet confirms every pending graceful delete. */
export async function confirmDeletes(env: TestEnv): Promise<void> {
  for (const pod of (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items) {
    if (!pod.metadata.deletionTimestamp) continue;
    await env.fake.delete(Pods, TEST_NAMESPACE, pod.metadata.name!, { gracePeriodSeconds: 0 });
  }
}

/** Every stored, non-terminating pod becomes a live VM. */
export async function makeAllLive(env: TestEnv): Promise<void> {
  for (const pod of (await env.fake.list(Pods, { namespace: TEST_NAMESPACE })).items) {
    if (pod.metadata.deletionTimestamp) continue;
    env.fake.seed(Pods, livePod(pod));
  }
}
