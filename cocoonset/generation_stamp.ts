/**
 * The generation stamp: every owned pod carries the CocoonSet generation it is reconciled
 * against, which vk-cocoon echoes back as the lifecycle observed generation. A counter, unlike a
 * timestamp, cannot be fooled by clock skew or a lagging cache.
 */
import { wrapError } from "../kube/mod.ts";
import { patchCocoonSetGeneration } from "../common/k8s/pod_patch.ts";
import { podRef, type SetPass } from "./pass.ts";
import { podsByName } from "./pods.ts";

/** Stamps the current generation on every owned pod that does not carry it yet. */
export async function syncCocoonSetGeneration(pass: SetPass): Promise<void> {
  const generation = pass.cs.metadata.generation ?? 0;
  for (const pod of podsByName(pass.classified)) {
    pass.signal.throwIfAborted();
    try {
      await patchCocoonSetGeneration(pass.deps.client, pod, generation, pass.signal);
    } catch (err) {
      throw wrapError(`stamp cocoonset generation on ${podRef(pod)}`, err);
    }
  }
}
