/** Pod state checks and lookups the reconcilers share. */
import type { Pod } from "../../kube/core.ts";
import { DEFAULT_NODE_POOL, LABEL_NODE_POOL } from "./keys.ts";

/** Whether the pod has condition Ready=True. */
export function isPodReady(pod: Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** Whether the pod is in phase Failed. Succeeded is not terminal: managed pods run forever. */
export function isPodPhaseFailed(pod: Pod): boolean {
  return pod.status?.phase === "Failed";
}

/** Whether any container status is in the running state. */
export function isContainerRunning(pod: Pod): boolean {
  // `!= null`: a JSON null decodes to a nil pointer in Go, i.e. "not running".
  return pod.status?.containerStatuses?.some((cs) => cs.state?.running != null) ?? false;
}

/** "namespace/name", for map keys. */
export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The pod's node pool: node selector, then label, then annotation, then the default pool. */
export function podNodePool(pod: Pod): string {
  return pod.spec?.nodeSelector?.[LABEL_NODE_POOL] || pod.metadata.labels?.[LABEL_NODE_POOL] ||
    pod.metadata.annotations?.[LABEL_NODE_POOL] || DEFAULT_NODE_POOL;
}
