/**
 * The image swap under the Go original's ClusterRole (tests/fixtures/go_original_rbac.yaml), on
 * the real control plane: the operator process (main.ts in the in-cluster sandbox) runs as a
 * ServiceAccount bound to exactly that role.
 *
 * - It becomes ready and reconciles a CocoonSet end to end (the simulator plays vk-cocoon), with
 *   the node checks off: one Warning naming `list, watch nodes` and the rule to add,
 *   `cocoon_operator_rbac_feature_enabled{feature="node-checks"} 0`, and not one request refused.
 *   Granting nodes with a ClusterRole of its own turns the checks on without a restart: the
 *   metric turns 1 and a set naming a missing node gets MigrationTargetUnknown.
 * - A role without a rule the Go original needs (pods create) stops it at start with exit 2 and
 *   one line naming the rule.
 * - With secure metrics (the default) and no TokenReview / SubjectAccessReview rules, /metrics
 *   refuses every scrape with 503 saying why, until the rules are granted; with plain http asked
 *   for, it serves.
 */
import assert from "node:assert/strict";
import { load as loadYaml, loadAll } from "js-yaml";
import { ANNOTATION_HIBERNATE } from "../../common/meta/keys.ts";
import { ApiClient } from "../../kube/api_client.ts";
import { Namespaces } from "../../kube/core.ts";
import { isAlreadyExists } from "../../kube/errors.ts";
import { loadRestConfig, Transport } from "../../kube/transport.ts";
import { createCertificateAuthority } from "../../kube/x509.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { operatorKubeconfigUnder } from "../harness/operator_identity.ts";
import type { ProcessHandle } from "../harness/process.ts";
import { startSandboxedOperator } from "../harness/sandboxed_operator.ts";
import { stackTest } from "../harness/stack.ts";
import {
  conditionOf,
  createSet,
  inPhase,
  patchSpec,
  podsOf,
  waitEvent,
  waitSet,
} from "../harness/stack_objects.ts";
import { repoRoot } from "../harness/kustomize.ts";
import { waitFor } from "../harness/wait.ts";
import { GO_ORIGINAL_RBAC_PATH } from "../fixtures/go_original_rbac.ts";

const GO_RBAC = await Deno.readTextFile(GO_ORIGINAL_RBAC_PATH);
const FEATURE_METRIC = "cocoon_operator_rbac_feature_enabled";

/** The operator's JSON log records. */
function logRecords(stderr: string): { level: string; message: string }[] {
  return stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
}

/** The lines of stderr that are not JSON log records. */
function plainLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l && !l.startsWith("{"));
}

/** The sample line of a series in a /metrics text, or undefined. */
function sample(text: string, name: string, labels: string): string | undefined {
  return text.split("\n").find((l) => l.startsWith(`${name}{${labels}} `));
}

/** The exit status, or a failure once deadlineMs passed with the process still running. */
async function exitStatus(proc: ProcessHandle, deadlineMs: number): Promise<Deno.CommandStatus> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      proc.status,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          proc.stop(5_000).catch(() => {});
          reject(new Error(`still running after ${deadlineMs} ms:\n${proc.output.slice(-2000)}`));
        }, deadlineMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

stackTest(
  "Go original's ClusterRole: ready, reconciles, node checks off with a Warning; a grant turns them on",
  {
    operatorRbac: GO_RBAC,
    leaderElect: true,
    operatorEnv: { RBAC_RECHECK_SECONDS: "1" },
  },
  async (stack, t) => {
    const op = stack.operators[0];
    const cs = await createSet(stack, "team-go", "agents", { agent: { replicas: 1 } });

    await t.step("it reconciles a CocoonSet end to end", async () => {
      await waitSet(stack, cs, "Running", inPhase("Running"));
      const pods = await podsOf(stack, cs);
      assert.deepEqual(pods.map((p) => p.metadata.name).sort(), ["agents-0", "agents-1"]);
    });

    await t.step(
      "one Warning names the permission, the feature and the rule; metric 0",
      async () => {
        const warnings = logRecords(op.proc.stderr).filter((r) =>
          r.level === "WARN" && r.message.startsWith("node-checks is off")
        );
        assert.equal(warnings.length, 1, op.proc.output.slice(-3000));
        assert.match(warnings[0].message, /the operator's RBAC role lacks list, watch nodes;/);
        assert.ok(
          warnings[0].message.includes(
            '- {apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"]}',
          ),
          warnings[0].message,
        );
        // Plain-http metrics here: the review rules are not needed, and not asked about.
        assert.ok(!logRecords(op.proc.stderr).some((r) => r.message.includes("metrics-authn")));
        const text = await op.metrics();
        assert.equal(
          sample(text, FEATURE_METRIC, 'feature="node-checks"'),
          `${FEATURE_METRIC}{feature="node-checks"} 0`,
        );
        assert.equal(sample(text, FEATURE_METRIC, 'feature="metrics-authn"'), undefined);
        // The role allows everything it asked for: no node list, no request refused.
        await stack.assertOperatorsHealthy();
      },
    );

    await t.step("granting nodes turns the checks on without a restart", async () => {
      const pid = op.proc.pid;
      for (
        const args of [
          [
            "create",
            "clusterrole",
            "cocoon-operator-nodes",
            "--verb=list,watch",
            "--resource=nodes",
          ],
          [
            "create",
            "clusterrolebinding",
            "cocoon-operator-nodes",
            "--clusterrole=cocoon-operator-nodes",
            "--serviceaccount=cocoon-system:cocoon-operator",
          ],
        ]
      ) {
        const r = await stack.cp.kubectl(args);
        assert.equal(r.code, 0, r.stderr);
      }
      await waitFor(
        "node-checks on",
        async () =>
          sample(await op.metrics(), FEATURE_METRIC, 'feature="node-checks"') ===
            `${FEATURE_METRIC}{feature="node-checks"} 1`,
        30_000,
        200,
      );
      assert.ok(logRecords(op.proc.stderr).some((r) => r.message.startsWith("node-checks is on")));
      assert.equal(stack.operators[0].proc.pid, pid, "the same process");
      assert.ok(stack.alive(0));

      // The node problem the port reports, which the Go original (and the checks off) would not.
      const running = await waitSet(stack, cs, "Running", inPhase("Running"));
      const mainBefore = (await podsOf(stack, running)).find((p) => p.metadata.name === "agents-0");
      await patchSpec(stack, running, { nodeName: "no-such-node" });
      const after = await waitSet(
        stack,
        running,
        "Progressing=False MigrationTargetUnknown",
        (c) => conditionOf(c, "Progressing")?.reason === "MigrationTargetUnknown",
      );
      assert.equal(after.status?.phase, "Running");
      await waitEvent(stack, after, "MigrationTargetUnknown", /no node no-such-node/);
      const mainAfter = (await podsOf(stack, after)).find((p) => p.metadata.name === "agents-0");
      assert.equal(mainAfter?.metadata.uid, mainBefore?.metadata.uid, "the main was not moved");
      assert.equal(mainAfter?.metadata.annotations?.[ANNOTATION_HIBERNATE], undefined);
      await stack.assertOperatorsHealthy();
    });
  },
);

Deno.test({
  name: "Go original's ClusterRole: a rule Go needs missing, or secure metrics without reviews",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane();
    const admin = new ApiClient(new Transport(await loadRestConfig(cp.kubeconfigPath)));
    const ociRegistry = "127.0.0.1:1/cocoon";
    try {
      try {
        await admin.create(Namespaces, { metadata: { name: "cocoon-system" } });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }

      await t.step("without pods create: exit 2 at start, one line naming the rule", async () => {
        const docs = loadAll(GO_RBAC) as {
          kind: string;
          metadata: { name: string };
          rules?: { resources: string[]; verbs: string[] }[];
        }[];
        for (const doc of docs) {
          doc.metadata.name = "cocoon-operator-no-create";
          for (const rule of doc.rules ?? []) {
            if (rule.resources.includes("pods")) {
              rule.verbs = rule.verbs.filter((v) => v !== "create");
            }
          }
          if (doc.kind === "ClusterRoleBinding") {
            (doc as unknown as { roleRef: { name: string } }).roleRef.name =
              "cocoon-operator-no-create";
          }
        }
        const kubeconfig = await operatorKubeconfigUnder(
          cp,
          docs.map((d) => JSON.stringify(d)).join("\n---\n"),
        );
        const op = await startSandboxedOperator({
          cp,
          ociRegistry,
          kubeconfig,
          waitReady: false,
        });
        // Well before any cache-sync timeout (120 s): it must not wait for one.
        const status = await exitStatus(op.proc, 60_000);
        assert.equal(status.code, 2, op.proc.output);
        assert.deepEqual(plainLines(op.proc.stderr), [
          "cocoon-operator: the operator's RBAC role lacks permissions it cannot run without " +
          "(the Go original's ClusterRole grants them too): create pods (all namespaces); " +
          'grant them (config/rbac, docs/installation.md "The ClusterRole") and restart',
        ]);
        const removed = await cp.kubectl([
          "delete",
          "clusterrole,clusterrolebinding",
          "cocoon-operator-no-create",
        ]);
        assert.equal(removed.code, 0, removed.stderr);
      });

      const kubeconfig = await operatorKubeconfigUnder(cp, GO_RBAC);
      const reader = loadYaml(
        await Deno.readTextFile(await cp.serviceAccountKubeconfig("monitoring", "scraper")),
      ) as { users: { user: { token: string } }[] };
      const token = reader.users[0].user.token;
      const bound = await cp.kubectl([
        "create",
        "clusterrolebinding",
        "scraper-metrics",
        "--clusterrole=scraper-metrics",
        "--serviceaccount=monitoring:scraper",
      ]);
      assert.equal(bound.code, 0, bound.stderr);
      const readerRole = await cp.kubectl([
        "create",
        "clusterrole",
        "scraper-metrics",
        "--verb=get",
        "--non-resource-url=/metrics",
      ]);
      assert.equal(readerRole.code, 0, readerRole.stderr);

      await t.step(
        "secure metrics without the reviews: every scrape 503, then 200 once granted",
        async () => {
          const ca = await createCertificateAuthority("go-rbac-metrics-ca");
          const serving = await ca.issue({
            commonName: "metrics",
            ipAddresses: ["127.0.0.1"],
            usage: "server",
          });
          const certDir = await Deno.makeTempDir();
          await Deno.writeTextFile(`${certDir}/tls.crt`, serving.certPem);
          await Deno.writeTextFile(`${certDir}/tls.key`, serving.keyPem);
          const https = Deno.createHttpClient({ caCerts: [ca.certPem] });
          // config/rbac names no namespace: the binding's subject gets the one config/default gives.
          const metricsAuth = (loadAll(
            await Deno.readTextFile(`${repoRoot}config/rbac/metrics_auth_role.yaml`),
          ) as { kind: string; subjects?: { namespace?: string }[] }[])
            .map((doc) => {
              for (const subject of doc.subjects ?? []) subject.namespace = "cocoon-system";
              return JSON.stringify(doc);
            })
            .join("\n---\n");
          const op = await startSandboxedOperator({
            cp,
            ociRegistry,
            kubeconfig,
            secureMetrics: true,
            metricsCertDir: certDir,
            env: { RBAC_RECHECK_SECONDS: "1" },
          });
          try {
            const scrape = async (bearer?: string) => {
              const res = await fetch(`https://127.0.0.1:${op.metricsPort}/metrics`, {
                client: https,
                headers: bearer ? { Authorization: `Bearer ${bearer}` } : {},
              });
              return { status: res.status, body: await res.text() };
            };
            for (const bearer of [token, undefined]) {
              const refused = await scrape(bearer);
              assert.equal(refused.status, 503, refused.body);
              assert.match(
                refused.body,
                /^Service Unavailable: \/metrics cannot check who is calling: the operator's RBAC role lacks create tokenreviews\.authentication\.k8s\.io; create subjectaccessreviews\.authorization\.k8s\.io\. Grant them \(config\/rbac\/metrics_auth_role\.yaml\), or serve plain http with --metrics-secure=false\n$/,
              );
            }
            const records = logRecords(op.proc.stderr);
            assert.ok(
              records.some((r) =>
                r.level === "WARN" && r.message.startsWith("metrics-authn is off")
              ),
            );
            assert.ok(records.some((r) => r.message.startsWith("metrics request refused")));

            const applied = await cp.kubectl(["apply", "-f", "-"], { stdin: metricsAuth });
            assert.equal(applied.code, 0, applied.stderr);
            const ok = await waitFor(
              "an authorized scrape",
              async () => {
                const r = await scrape(token);
                return r.status === 200 ? r : undefined;
              },
              30_000,
              200,
            );
            assert.ok(ok.body.includes(`${FEATURE_METRIC}{feature="metrics-authn"} 1`), ok.body);
            assert.ok(ok.body.includes(`${FEATURE_METRIC}{feature="node-checks"} 0`));
            assert.equal((await scrape()).status, 401, "callers are checked again");
            assert.equal((await op.stop()).code, 0, op.proc.output.slice(-3000));
          } finally {
            https.close();
            await op.stop(5_000).catch(() => {});
            await Deno.remove(certDir, { recursive: true });
            const removed = await cp.kubectl(["delete", "--ignore-not-found", "-f", "-"], {
              stdin: metricsAuth,
            });
            assert.equal(removed.code, 0, removed.stderr);
          }
        },
      );

      await t.step("plain http asked for: served without the reviews", async () => {
        const op = await startSandboxedOperator({ cp, ociRegistry, kubeconfig });
        try {
          const text = await op.metrics();
          assert.ok(text.includes(`${FEATURE_METRIC}{feature="node-checks"} 0`), text);
          assert.ok(!text.includes('feature="metrics-authn"'));
          await op.assertNoForbidden();
          assert.equal((await op.stop()).code, 0, op.proc.output.slice(-3000));
        } finally {
          await op.stop(5_000).catch(() => {});
        }
      });
    } finally {
      await admin.transport.close();
      await cp.stop();
    }
  },
});
