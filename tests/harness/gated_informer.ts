import { ApiClient } from "../../kube/api_client.ts";
import type { WatchEvent, WatchOptions } from "../../kube/client.ts";
import { type Pod, Pods } from "../../kube/core.ts";
import { SharedInformer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/object.ts";
import type { ResourceType } from "../../kube/resource.ts";

/**
 * A pod informer whose watch a test can hold shut, so the gap between "connection lost" and
 * "reconnected" is deterministic: while `gate.closed`, every watch attempt fails fast and the
 * informer backs off (50–200 ms). `seen` records handler calls as add:name, update:name:<label v>
 * and delete:name.
 */
export interface GatedInformer {
  informer: SharedInformer<Pod>;
  gate: { closed: boolean };
  seen: string[];
  stop(): Promise<void>;
}

export function startGatedPodInformer(client: ApiClient, namespace: string): GatedInformer {
  const gate = { closed: false };
  class GatedClient extends ApiClient {
    override watch<T extends KubeObject>(
      rt: ResourceType<T>,
      opts: WatchOptions,
    ): AsyncIterable<WatchEvent<T>> {
      if (gate.closed) throw new Error("watch gated by the test");
      return super.watch(rt, opts);
    }
  }
  const informer = new SharedInformer<Pod>({
    client: new GatedClient(client.transport),
    rt: Pods,
    namespace,
    minBackoffMs: 50,
    maxBackoffMs: 200,
  });
  const seen: string[] = [];
  informer.addEventHandler({
    onAdd: (o) => seen.push(`add:${o.metadata.name}`),
    onUpdate: (_o, n) => seen.push(`update:${n.metadata.name}:${n.metadata.labels?.v ?? ""}`),
    onDelete: (o) => seen.push(`delete:${o.metadata.name}`),
  });
  const ac = new AbortController();
  const run = informer.run(ac.signal);
  return {
    informer,
    gate,
    seen,
    stop: async () => {
      ac.abort();
      await run;
    },
  };
}
