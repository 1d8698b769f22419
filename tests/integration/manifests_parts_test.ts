/**
 * The kustomize tree's namespace and optional parts, on the real API server:
 *
 * - the namespace is named once, in config/default: changing that line moves every object of
 *   every install (the bases, the sharded overlay, each component), with the bindings' subjects,
 *   the metrics certificate's names and the ServiceMonitor's server name;
 * - the components (config/prometheus, config/certmanager, config/network-policy and its egress
 *   part, config/ha) over the sharded overlay pass a server-side dry run, the Prometheus
 *   Operator's and cert-manager's objects against stand-in CRDs (tests/harness/addon_crds.ts);
 * - they fit together: the NetworkPolicy admits the metrics port only from namespaces labelled
 *   `metrics: enabled` and the probe port from anywhere, the Certificate is written into the
 *   Secret the Deployment mounts and names the Service the ServiceMonitor checks it against;
 * - with more than one replica the Deployment's termination grace covers the operator's bounded
 *   shutdown, which a server-side apply over a Go install takes over with --force-conflicts.
 */
import assert from "node:assert/strict";
import { installAddonCrds } from "../harness/addon_crds.ts";
import { writeGoInstall } from "../harness/go_install.ts";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import {
  applyNamespaces,
  type BuiltObject,
  kustomizeBuild,
  parseObjects,
  repoRoot,
  writeOverlay,
} from "../harness/kustomize.ts";

const COMPONENTS = [
  "config/prometheus",
  "config/certmanager",
  "config/network-policy",
  "config/network-policy/egress",
];

/** Kinds whose objects live in a namespace, among those this tree builds. */
const NAMESPACED = new Set([
  "ServiceAccount",
  "Role",
  "RoleBinding",
  "Deployment",
  "Service",
  "PodDisruptionBudget",
  "NetworkPolicy",
  "ServiceMonitor",
  "PrometheusRule",
  "Issuer",
  "Certificate",
]);

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

function find(objects: BuiltObject[], kind: string, name?: string): BuiltObject {
  const found = objects.find((o) =>
    o.kind === kind && (name === undefined || o.metadata.name === name)
  );
  assert.ok(
    found,
    `no ${kind}${name ? ` ${name}` : ""} among ${objects.map((o) => o.kind).join(", ")}`,
  );
  return found;
}

/** Every namespaced object in `namespace`, and every subject of ours bound there. */
function assertAllIn(objects: BuiltObject[], namespace: string, where: string): void {
  for (const o of objects) {
    const id = `${where}: ${o.kind} ${o.metadata.name}`;
    if (NAMESPACED.has(o.kind)) assert.equal(o.metadata.namespace, namespace, id);
    else assert.equal(o.metadata.namespace, undefined, id);
    for (const s of (o.subjects ?? []) as Subject[]) {
      if (s.name === "cocoon-operator") assert.equal(s.namespace, namespace, `${id} subject`);
    }
  }
  const ns = objects.filter((o) => o.kind === "Namespace").map((o) => o.metadata.name);
  if (ns.length) assert.deepEqual(ns, [namespace], where);
}

async function copyTree(from: string, to: string): Promise<void> {
  const out = await new Deno.Command("cp", { args: ["-r", from, to] }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

async function dryRun(cp: ControlPlane, dir: string): Promise<BuiltObject[]> {
  const r = await cp.kubectl([
    "apply",
    "--dry-run=server",
    "--server-side",
    "--field-manager=cocoon-install-test",
    "-o",
    "yaml",
    "-k",
    dir,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const docs = parseObjects(r.stdout);
  // One object comes back bare, several as a List.
  return docs.length === 1 && docs[0].kind === "List"
    ? (docs[0] as unknown as { items: BuiltObject[] }).items
    : docs;
}

Deno.test({
  name: "manifests: one namespace line, the optional components and how they fit together",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane({ crdDir: "" });
    const scratch = await Deno.makeTempDir({ prefix: "config-copy-" });
    let overlay: string | undefined;
    try {
      await t.step(
        "no manifest but config/default's kustomization names the namespace",
        async () => {
          const found: string[] = [];
          const walk = async (dir: string) => {
            for await (const e of Deno.readDir(dir)) {
              const path = `${dir}/${e.name}`;
              if (e.isDirectory) await walk(path);
              else if (/\.ya?ml$/.test(e.name)) {
                const text = await Deno.readTextFile(path);
                text.split("\n").forEach((line) => {
                  if (!line.trimStart().startsWith("#") && line.includes("cocoon-system")) {
                    found.push(`${path.slice(repoRoot.length)}: ${line.trim()}`);
                  }
                });
              }
            }
          };
          await walk(`${repoRoot}config`);
          assert.deepEqual(found, ["config/default/kustomization.yaml: namespace: cocoon-system"]);
        },
      );

      await t.step("changing that line moves every object of every install", async () => {
        await copyTree(`${repoRoot}config`, `${scratch}/config`);
        const kustomization = `${scratch}/config/default/kustomization.yaml`;
        const text = await Deno.readTextFile(kustomization);
        await Deno.writeTextFile(
          kustomization,
          text.replace(/^namespace: cocoon-system$/m, "namespace: team-ops"),
        );
        const overlay = `${scratch}/all`;
        await Deno.mkdir(overlay);
        await Deno.writeTextFile(
          `${overlay}/kustomization.yaml`,
          [
            "resources: [../config/overlays/sharded]",
            `components: [${COMPONENTS.map((c) => `../${c}`).join(", ")}]`,
          ].join("\n"),
        );
        for (
          const dir of [
            "config/default",
            "config/overlays/sa-key",
            "config/overlays/sharded",
            "all",
          ]
        ) {
          const objects = await kustomizeBuild(cp, `${scratch}/${dir}`);
          assertAllIn(objects, "team-ops", dir);
          const text = JSON.stringify(objects);
          assert.ok(!text.includes("cocoon-system"), `${dir} still names cocoon-system`);
          assert.ok(!text.includes(".NAMESPACE."), `${dir} left a NAMESPACE placeholder`);
          if (dir === "all") {
            const monitor = find(objects, "ServiceMonitor") as {
              spec?: { endpoints: { tlsConfig: { serverName: string } }[] };
            };
            assert.equal(
              monitor.spec?.endpoints[0].tlsConfig.serverName,
              "cocoon-operator-metrics.team-ops.svc",
            );
            const cert = find(objects, "Certificate") as { spec?: { dnsNames: string[] } };
            assert.deepEqual(cert.spec?.dnsNames, [
              "cocoon-operator-metrics.team-ops.svc",
              "cocoon-operator-metrics.team-ops.svc.cluster.local",
            ]);
          }
        }
      });

      await applyNamespaces(cp, "config/default");
      await installAddonCrds(cp);
      overlay = await writeOverlay({
        resources: ["config/overlays/sharded"],
        components: COMPONENTS,
      });
      let objects: BuiltObject[] = [];
      await t.step("sharded with every component: a server-side dry run", async () => {
        objects = await dryRun(cp, overlay!);
        assertAllIn(objects, "cocoon-system", "sharded + components");
        const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`);
        for (
          const want of [
            "Service/cocoon-operator-metrics",
            "ServiceMonitor/cocoon-operator",
            "PrometheusRule/cocoon-operator",
            "ClusterRoleBinding/cocoon-operator-metrics-reader",
            "Issuer/cocoon-operator-selfsigned",
            "Certificate/cocoon-operator-metrics",
            "NetworkPolicy/cocoon-operator-ingress",
            "NetworkPolicy/cocoon-operator-egress",
            "PodDisruptionBudget/cocoon-operator",
            "Role/cocoon-operator-shard-member",
          ]
        ) assert.ok(kinds.includes(want), `${want} missing from ${kinds.join(", ")}`);
      });

      await t.step("the parts fit: ports, Secret, names, ingress sources", () => {
        type Container = {
          ports: { name: string; containerPort: number }[];
          volumeMounts: { name: string; mountPath: string }[];
          args: string[];
        };
        const deploy = find(objects, "Deployment") as {
          spec?: {
            template: {
              spec: {
                containers: Container[];
                volumes: { name: string; secret?: { secretName: string } }[];
              };
            };
          };
        };
        const pod = deploy.spec!.template.spec;
        const port = (name: string) =>
          pod.containers[0].ports.find((p) => p.name === name)?.containerPort;
        const certVolume = pod.volumes.find((v) =>
          pod.containers[0].volumeMounts.some((m) =>
            m.name === v.name &&
            pod.containers[0].args.includes(`--metrics-cert-dir=${m.mountPath}`)
          )
        );
        assert.ok(certVolume?.secret, "the metrics certificate is mounted from a Secret");

        const cert = find(objects, "Certificate") as {
          spec?: {
            secretName: string;
            dnsNames: string[];
            issuerRef: { kind: string; name: string };
          };
        };
        assert.equal(cert.spec?.secretName, certVolume.secret.secretName);
        const service = find(objects, "Service", "cocoon-operator-metrics");
        assert.ok(cert.spec?.dnsNames.includes(`${service.metadata.name}.cocoon-system.svc`));
        const issuer = find(objects, "Issuer");
        assert.deepEqual(cert.spec?.issuerRef, { kind: "Issuer", name: issuer.metadata.name });

        const monitor = find(objects, "ServiceMonitor") as {
          spec?: {
            endpoints: {
              scheme: string;
              tlsConfig: { serverName: string; ca: { secret: { name: string; key: string } } };
            }[];
          };
        };
        const endpoint = monitor.spec!.endpoints[0];
        assert.equal(endpoint.scheme, "https");
        assert.ok(cert.spec?.dnsNames.includes(endpoint.tlsConfig.serverName));
        assert.deepEqual(endpoint.tlsConfig.ca.secret, {
          name: certVolume.secret.secretName,
          key: "ca.crt",
        });

        type Peer = { namespaceSelector?: { matchLabels?: Record<string, string> } };
        const ingress = find(objects, "NetworkPolicy", "cocoon-operator-ingress") as {
          spec?: {
            policyTypes: string[];
            ingress: { from?: Peer[]; ports: { port: number }[] }[];
          };
        };
        assert.deepEqual(ingress.spec?.policyTypes, ["Ingress"]);
        const rules = ingress.spec!.ingress;
        const toPort = (p: number | undefined) =>
          rules.filter((r) => r.ports.some((x) => x.port === p));
        const metrics = toPort(port("metrics"));
        assert.equal(metrics.length, 1, "one rule admits the metrics port");
        assert.deepEqual(metrics[0].from, [{
          namespaceSelector: { matchLabels: { metrics: "enabled" } },
        }]);
        const probes = toPort(port("probe"));
        assert.equal(probes.length, 1, "one rule admits the probe port");
        assert.equal(probes[0].from, undefined, "probes from anywhere (the kubelet)");
        const egress = find(objects, "NetworkPolicy", "cocoon-operator-egress") as {
          spec?: { policyTypes: string[]; egress: { ports?: { port: number }[] }[] };
        };
        // Egress only: an Ingress type here would admit the metrics port from everywhere again.
        assert.deepEqual(egress.spec?.policyTypes, ["Egress"]);
        const ports = egress.spec!.egress.flatMap((e) => (e.ports ?? []).map((p) => p.port));
        assert.deepEqual([...new Set(ports)].sort((a, b) => a - b), [53, 443, 6443]);
      });

      await t.step("the termination grace covers draining and releasing the Lease", () => {
        const deploy = find(objects, "Deployment") as {
          spec?: {
            replicas: number;
            template: { spec: { terminationGracePeriodSeconds?: number } };
          };
        };
        assert.ok((deploy.spec?.replicas ?? 1) > 1);
        // kube/controller.ts drains for up to 30 s, kube/leader.ts gives the release 10 s, and
        // kube/manager.ts writes the queued Events for up to 30 s; the kubelet's default is 30.
        const grace = deploy.spec?.template.spec.terminationGracePeriodSeconds ?? 30;
        assert.ok(grace >= 30 + 10 + 30, `terminationGracePeriodSeconds ${grace}`);
      });

      await t.step(
        "over a Go install, a server-side apply of the sharded overlay needs --force-conflicts once",
        async () => {
          // The Go original's Deployment, created client-side: the API server's default grace
          // (30 s) is recorded as its creator's field, which config/ha changes.
          const goDir = await writeGoInstall();
          try {
            const go = await cp.kubectl(["apply", "-k", goDir]);
            assert.equal(go.code, 0, go.stderr);
          } finally {
            await Deno.remove(goDir, { recursive: true });
          }
          const apply = (...more: string[]) =>
            cp.kubectl([
              "apply",
              "--server-side",
              ...more,
              "-k",
              `${repoRoot}config/overlays/sharded`,
            ]);
          const refused = await apply();
          assert.notEqual(refused.code, 0);
          assert.match(refused.stderr, /conflict with "kubectl-client-side-apply"/);
          assert.match(refused.stderr, /terminationGracePeriodSeconds/);
          const forced = await apply("--force-conflicts");
          assert.equal(forced.code, 0, forced.stderr);
          const grace = await cp.kubectl([
            "-n",
            "cocoon-system",
            "get",
            "deployment",
            "cocoon-operator",
            "-o",
            "jsonpath={.spec.template.spec.terminationGracePeriodSeconds}",
          ]);
          assert.equal(grace.stdout.trim(), "75");
          // A client-side apply (the documented swap) meets no conflict at all.
          const again = await cp.kubectl(["apply", "-k", `${repoRoot}config/overlays/sharded`]);
          assert.equal(again.code, 0, again.stderr);
        },
      );
    } finally {
      await Deno.remove(scratch, { recursive: true }).catch(() => {});
      if (overlay) await Deno.remove(overlay, { recursive: true }).catch(() => {});
      await cp.stop();
    }
  },
});
