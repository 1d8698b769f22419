/**
 * Step 4 of a pass (docs/hibernation.md, "One pass"): the pod the request targets and the VM it
 * runs. The pod is read from the cache first and, when the cache says NotFound, straight from the
 * API server: the pod cache may hold only CocoonSet pods, and a request may target any pod. A
 * missing pod, or one vk-cocoon has not named a VM on yet, is reported (problem.ts), not written.
 *
 * @module
 */
import type { CocoonHibernation } from "../common/apis/v1/mod.ts";
import { ANNOTATION_VM_NAME } from "../common/meta/keys.ts";
import { parseVMSpec } from "../common/meta/vmspec.ts";
import { isNotFound, Pods, wrapError } from "../kube/mod.ts";
import type { Pod, Reader } from "../kube/mod.ts";
import type { RequestProblem } from "./problem.ts";

/** The readers a target pod is looked up in, in order: the cache, then the API server. */
export interface TargetReaders {
  /** Cached reads (the manager's client). */
  client: Reader;
  /** Uncached reads: the fallback for target pods the pod cache does not hold. */
  apiReader: Reader;
}

/** The pod a request acts on and the VM name it shows. */
export interface Target {
  pod: Pod;
  vmName: string;
}

/** The target pod from the cache, else from the API server; undefined when it does not exist. */
export async function readTargetPod(
  readers: TargetReaders,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<Pod | undefined> {
  for (const reader of [readers.client, readers.apiReader]) {
    try {
      return await reader.get(Pods, namespace, name, { signal });
    } catch (err) {
      if (!isNotFound(err)) {
        throw wrapError(`get target pod ${namespace}/${name}`, err);
      }
    }
  }
  return undefined;
}

/** hib's target pod and its VM name, or the problem that it lacks one (target-missing). */
export async function findTarget(
  readers: TargetReaders,
  hib: CocoonHibernation,
  signal: AbortSignal,
): Promise<Target | RequestProblem> {
  const namespace = hib.metadata.namespace ?? "";
  const podName = hib.spec.podRef.name;
  const pod = await readTargetPod(readers, namespace, podName, signal);
  if (!pod) {
    return { problem: "target-missing", message: `pod ${namespace}/${podName} not yet present` };
  }
  const vmName = parseVMSpec(pod).vmName;
  if (!vmName) {
    // vk-cocoon names the VM once it has provisioned it.
    return {
      problem: "target-missing",
      message: `pod ${namespace}/${podName} has no ${ANNOTATION_VM_NAME} annotation yet`,
    };
  }
  return { pod, vmName };
}
