/**
 * Opt-in recording of what the operator did, for the behaviour digest (tests/digest/): when
 * `COCOON_BEHAVIOUR_DIGEST_DIR` names a folder, every control plane the harness starts writes a
 * kube-apiserver audit log there, every sandboxed operator has its /metrics scraped once just
 * before it is stopped, and every stack saves the registry requests its proxy passed on. Unset
 * (the default), nothing here does anything.
 *
 * Files in the folder, one per source so parallel planes and replicas never share a file:
 * - `audit-<id>.jsonl`: the API server's audit events (JSON lines), across API server restarts;
 * - `metrics-<id>.prom`: one scrape of one operator process;
 * - `registry-<id>.jsonl`: the operators' registry requests through one stack's proxy.
 *
 * @module
 */

/** The variable that turns recording on; its value is the folder to record into. */
export const DIGEST_DIR_VARIABLE = "COCOON_BEHAVIOUR_DIGEST_DIR";

/** The recording folder, or undefined when recording is off (or the variable unreadable). */
export function digestDir(): string | undefined {
  try {
    const dir = Deno.env.get(DIGEST_DIR_VARIABLE);
    return dir ? dir : undefined;
  } catch {
    // No --allow-env for it: recording stays off.
    return undefined;
  }
}

/**
 * The audit policy: RequestResponse level for status writes of the project's CRDs (the body sent
 * shows which fields a write carried, the answer the status it left: phase, conditions and
 * reasons), Request level (the body as sent) for Event writes of both Event APIs, Metadata (who,
 * what, which resource, the answer's code) for everything else. The first matching rule wins. The
 * RequestReceived stage is left out: every request still leaves ResponseStarted (watches) or
 * ResponseComplete, and the digest counts each audit ID once.
 */
export const AUDIT_POLICY = {
  apiVersion: "audit.k8s.io/v1",
  kind: "Policy",
  omitStages: ["RequestReceived"],
  rules: [
    {
      level: "RequestResponse",
      verbs: ["create", "update", "patch"],
      resources: [{
        group: "cocoonset.cocoonstack.io",
        resources: ["cocoonsets/status", "cocoonhibernations/status"],
      }],
    },
    {
      level: "Request",
      verbs: ["create", "update", "patch"],
      resources: [
        { group: "", resources: ["events"] },
        { group: "events.k8s.io", resources: ["events"] },
      ],
    },
    { level: "Metadata" },
  ],
};

/** A name unique within the folder, for one plane or one scrape. */
function uniqueId(): string {
  return `${Date.now()}-${crypto.randomUUID().slice(0, 8)}`;
}

/**
 * kube-apiserver flags that write the audit log into the recording folder (the policy file goes
 * to dataDir, which dies with the plane), or [] when recording is off.
 */
export async function auditFlags(dataDir: string): Promise<string[]> {
  const dir = digestDir();
  if (!dir) return [];
  await Deno.mkdir(dir, { recursive: true });
  const policyFile = `${dataDir}/audit-policy.json`;
  await Deno.writeTextFile(policyFile, JSON.stringify(AUDIT_POLICY, null, 2));
  return [
    `--audit-policy-file=${policyFile}`,
    `--audit-log-path=${dir}/audit-${uniqueId()}.jsonl`,
    "--audit-log-format=json",
    // Written before the answer leaves, so a plane killed at the end of a test loses nothing.
    "--audit-log-mode=blocking",
    // One file per plane however long it runs.
    "--audit-log-maxsize=0",
  ];
}

/**
 * Saves one /metrics scrape of an operator process into the recording folder, once per process
 * (a second call does nothing). Never throws: a process already gone, or metrics it cannot read
 * (HTTPS with authentication), are noted on stderr and skipped.
 */
export function metricsRecorder(
  what: string,
  scrape: () => Promise<string>,
): () => Promise<void> {
  let done = false;
  return async () => {
    const dir = digestDir();
    if (!dir || done) return;
    done = true;
    try {
      const text = await scrape();
      await Deno.mkdir(dir, { recursive: true });
      await Deno.writeTextFile(`${dir}/metrics-${uniqueId()}.prom`, text);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      console.error(`[behaviour-digest] no metrics scrape of ${what}: ${message}`);
    }
  };
}

/** One registry request as the proxy saw it (tests/harness/registry_proxy.ts ProxiedRequest). */
export interface RecordedRegistryRequest {
  method: string;
  path: string;
  status: number;
}

/**
 * Saves the requests the operators sent through the registry proxy (the simulator goes around
 * it) as `registry-<id>.jsonl`, when recording is on. Never throws; a failure is noted on stderr.
 */
export async function recordRegistryRequests(
  requests: readonly RecordedRegistryRequest[],
): Promise<void> {
  const dir = digestDir();
  if (!dir) return;
  try {
    await Deno.mkdir(dir, { recursive: true });
    const lines = requests.map(({ method, path, status }) =>
      JSON.stringify({ method, path, status })
    );
    await Deno.writeTextFile(`${dir}/registry-${uniqueId()}.jsonl`, lines.join("\n") + "\n");
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    console.error(`[behaviour-digest] registry requests not saved: ${message}`);
  }
}
