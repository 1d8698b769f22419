/**
 * The Helm chart (charts/cocoon-operator), with the Helm `deno task helm` builds:
 *
 * - `helm lint --strict` passes, and the values schema refuses what would break an install;
 * - with its default values the chart renders the objects `kubectl kustomize config/default`
 *   builds, and with the matching values those of the sharded and sa-key overlays and of the
 *   sharded overlay with every optional component (Helm's own labels and the Namespace aside:
 *   Helm installs into a namespace that exists);
 * - the release's namespace is in every object, subject and name that carries one;
 * - on the real API server: every object passes a server-side dry run; a real install, an
 *   upgrade that keeps a `kubectl set env` OCI_REGISTRY (and one that sets it from a value), the
 *   CRDs left alone by `helm upgrade` and brought up to date by the documented step, and an
 *   uninstall that keeps the CRDs and the custom resources;
 * - an install made with `kubectl apply -k config/default` is adopted by the chart, both with
 *   Helm's ownership annotations set by hand and with `--take-ownership`, keeping its
 *   OCI_REGISTRY.
 */
import assert from "node:assert/strict";
import { installAddonCrds } from "../harness/addon_crds.ts";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { CHART_DIR, helm, helmMissing, helmOk, helmSkipReason } from "../harness/helm.ts";
import {
  applyNamespaces,
  type BuiltObject,
  kustomizeBuild,
  parseObjects,
  repoRoot,
  writeOverlay,
} from "../harness/kustomize.ts";
import { kustomize } from "../../scripts/installer.ts";

const RELEASE = "cocoon-operator";
const NAMESPACE = "cocoon-system";

/** The labels Helm's conventions add to every object (and the release label on the pods). */
const HELM_LABELS = [
  "helm.sh/chart",
  "app.kubernetes.io/managed-by",
  "app.kubernetes.io/instance",
  "app.kubernetes.io/version",
];

/** The example addresses config/network-policy/egress ships with. */
const EGRESS_EXAMPLE = ["--set", "networkPolicy.egress.apiServerCIDRs={10.0.0.1/32}"].concat(
  ["--set", "networkPolicy.egress.registryCIDRs={192.0.2.0/24}"],
);

/** Values that turn on what every component of config/ adds. */
const EVERY_PART = [
  "--set",
  "sharding.enabled=true",
  "--set",
  "replicaCount=3",
  "--set",
  "metrics.serviceMonitor.enabled=true",
  "--set",
  "metrics.prometheusRule.enabled=true",
  "--set",
  "metrics.certManager.enabled=true",
  "--set",
  "networkPolicy.enabled=true",
  "--set",
  "networkPolicy.egress.enabled=true",
  ...EGRESS_EXAMPLE,
];

async function render(args: string[] = [], namespace = NAMESPACE): Promise<BuiltObject[]> {
  const out = await helmOk([
    "template",
    RELEASE,
    CHART_DIR,
    "--namespace",
    namespace,
    "--include-crds",
    ...args,
  ]);
  return parseObjects(out);
}

/** kustomize's objects of a repository folder or overlay, without the Namespace. */
async function built(dir: string): Promise<BuiltObject[]> {
  return parseObjects(await kustomize(dir)).filter((o) => o.kind !== "Namespace");
}

type Json = unknown;

/** A copy without Helm's labels, with name-keyed lists in name order. */
function normalized(o: BuiltObject): Json {
  const copy = structuredClone(o) as Record<string, Json>;
  const strip = (labels: unknown) => {
    if (!labels || typeof labels !== "object") return;
    for (const key of HELM_LABELS) delete (labels as Record<string, string>)[key];
  };
  strip((copy.metadata as BuiltObject["metadata"]).labels);
  const template = (copy.spec as { template?: { metadata?: { labels?: unknown } } } | undefined)
    ?.template;
  strip(template?.metadata?.labels);
  const byName = (value: Json): Json => {
    if (Array.isArray(value)) {
      const items = value.map(byName);
      const named = items.every((i) =>
        i !== null && typeof i === "object" && typeof (i as { name?: unknown }).name === "string"
      );
      return named
        ? [...items].sort((a, b) =>
          String((a as { name: string }).name).localeCompare((b as { name: string }).name)
        )
        : items;
    }
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, byName(v)]));
    }
    return value;
  };
  return byName(copy);
}

function keyed(objects: BuiltObject[]): Map<string, Json> {
  return new Map(
    objects.map((
      o,
    ) => [`${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`, normalized(o)]),
  );
}

function assertSameObjects(chart: BuiltObject[], kustomized: BuiltObject[]): void {
  const a = keyed(chart);
  const b = keyed(kustomized);
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), "the same objects");
  for (const [key, want] of b) assert.deepEqual(a.get(key), want, key);
}

function find(objects: BuiltObject[], kind: string, name?: string): BuiltObject {
  const found = objects.find((o) => o.kind === kind && (!name || o.metadata.name === name));
  assert.ok(found, `no ${kind} ${name ?? ""}`);
  return found;
}

interface PodSpec {
  priorityClassName?: string;
  topologySpreadConstraints?: { topologyKey: string }[];
  containers: { image: string; env?: { name: string; value?: string }[] }[];
}

function podSpec(objects: BuiltObject[]): PodSpec {
  return (find(objects, "Deployment").spec as { template: { spec: PodSpec } }).template.spec;
}

function envOf(objects: BuiltObject[]): Map<string, string | undefined> {
  return new Map((podSpec(objects).containers[0].env ?? []).map((e) => [e.name, e.value]));
}

Deno.test({
  name: `chart: lint, values schema, and the same objects as config/${helmSkipReason}`,
  ignore: helmMissing,
  async fn(t) {
    await t.step("helm lint --strict", async () => {
      await helmOk(["lint", "--strict", CHART_DIR]);
      await helmOk(["lint", "--strict", CHART_DIR, ...EVERY_PART]);
    });

    await t.step("the schema refuses values that would break an install", async () => {
      for (
        const [args, why] of [
          [["--set", "image.tag=latest"], /image\.tag|tag/],
          [["--set", "replicas=3"], /replicas/],
          [["--set", "metrics.port=0"], /port/],
          [["--set", "extraEnv[0].name=OCI_REGISTRY"], /extraEnv/],
        ] as const
      ) {
        const r = await helm(["template", RELEASE, CHART_DIR, ...args]);
        assert.notEqual(r.code, 0, `${args.join(" ")} was accepted`);
        assert.match(r.stderr, why);
      }
      const r = await helm([
        "template",
        RELEASE,
        CHART_DIR,
        "--set",
        "networkPolicy.egress.enabled=true",
      ]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /networkPolicy\.egress\.apiServerCIDRs/);
    });

    await t.step("default values: config/default's objects", async () => {
      assertSameObjects(await render(), await built(`${repoRoot}config/default`));
    });

    await t.step("sharding with 3 replicas: config/overlays/sharded's", async () => {
      assertSameObjects(
        await render(["--set", "sharding.enabled=true", "--set", "replicaCount=3"]),
        await built(`${repoRoot}config/overlays/sharded`),
      );
    });

    await t.step("registryKeySecret: config/overlays/sa-key's", async () => {
      assertSameObjects(
        await render(["--set", "registryKeySecret=cocoon-registry-key"]),
        await built(`${repoRoot}config/overlays/sa-key`),
      );
    });

    await t.step("every part: the sharded overlay with every component", async () => {
      const overlay = await writeOverlay({
        resources: ["config/overlays/sharded"],
        components: [
          "config/prometheus",
          "config/certmanager",
          "config/network-policy",
          "config/network-policy/egress",
        ],
      });
      try {
        assertSameObjects(await render(EVERY_PART), await built(overlay));
      } finally {
        await Deno.remove(overlay, { recursive: true });
      }
    });

    await t.step("the release's namespace in every object, subject and name", async () => {
      const objects = await render(EVERY_PART, "team-ops");
      const text = JSON.stringify(objects);
      assert.ok(!text.includes("cocoon-system"), "an object still names cocoon-system");
      for (const o of objects) {
        const scoped = !["CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"]
          .includes(o.kind);
        assert.equal(o.metadata.namespace, scoped ? "team-ops" : undefined, `${o.kind}`);
        for (const s of (o.subjects ?? []) as { name: string; namespace?: string }[]) {
          if (s.name === "cocoon-operator") assert.equal(s.namespace, "team-ops");
        }
      }
      const cert = find(objects, "Certificate").spec as { dnsNames: string[] };
      assert.equal(cert.dnsNames[0], "cocoon-operator-metrics.team-ops.svc");
    });

    await t.step("several replicas without sharding: standbys, budget, spread", async () => {
      const objects = await render(["--set", "replicaCount=2"]);
      assert.equal(envOf(objects).has("SHARDS"), false);
      assert.ok(find(objects, "PodDisruptionBudget"));
      assert.deepEqual(
        podSpec(objects).topologySpreadConstraints?.map((c) => c.topologyKey),
        ["kubernetes.io/hostname"],
      );
      assert.equal(objects.some((o) => o.metadata.name === "cocoon-operator-shard-member"), false);
      const one = await render();
      assert.equal(one.some((o) => o.kind === "PodDisruptionBudget"), false);
      assert.equal(podSpec(one).topologySpreadConstraints, undefined);
    });

    await t.step("image, registry, priority class, scheduling", async () => {
      const objects = await render([
        "--set",
        "image.repository=registry.example.com/cocoon/cocoon-operator",
        "--set",
        `image.digest=sha256:${"a".repeat(64)}`,
        "--set",
        "ociRegistry=europe-docker.pkg.dev/my-project/cocoon",
        "--set",
        "priorityClassName=platform-critical",
        "--set",
        "nodeSelector.pool=system",
      ]);
      const pod = podSpec(objects);
      assert.equal(
        pod.containers[0].image,
        `registry.example.com/cocoon/cocoon-operator@sha256:${"a".repeat(64)}`,
      );
      assert.equal(envOf(objects).get("OCI_REGISTRY"), "europe-docker.pkg.dev/my-project/cocoon");
      assert.equal(pod.priorityClassName, "platform-critical");
      assert.deepEqual((pod as { nodeSelector?: unknown }).nodeSelector, { pool: "system" });
      // Unset, the variable is not declared at all (a `kubectl set env` value stays).
      assert.equal(envOf(await render()).has("OCI_REGISTRY"), false);
    });

    await t.step("the chart deploys the release config/manager names", async () => {
      const chart = (await import("js-yaml")).load(
        await Deno.readTextFile(`${CHART_DIR}/Chart.yaml`),
      ) as { appVersion: string };
      assert.equal(
        podSpec(await render()).containers[0].image,
        `cocoon-operator:${chart.appVersion}`,
      );
    });
  },
});

/** The value of OCI_REGISTRY in the live Deployment; undefined when not declared. */
async function liveRegistry(cp: ControlPlane): Promise<string | undefined> {
  const r = await cp.kubectl([
    "-n",
    NAMESPACE,
    "get",
    "deployment",
    "cocoon-operator",
    "-o",
    "json",
  ]);
  assert.equal(r.code, 0, r.stderr);
  const env = (JSON.parse(r.stdout).spec.template.spec.containers[0].env ?? []) as {
    name: string;
    value?: string;
  }[];
  return env.find((e) => e.name === "OCI_REGISTRY")?.value;
}

async function kubectlOk(cp: ControlPlane, args: string[], stdin?: string): Promise<string> {
  const r = await cp.kubectl(args, stdin === undefined ? undefined : { stdin });
  assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** Whether an object exists. */
async function exists(cp: ControlPlane, ...args: string[]): Promise<boolean> {
  return (await cp.kubectl(["get", ...args, "-o", "name"])).code === 0;
}

Deno.test({
  name:
    `chart: on the real API server: dry run, install, upgrade, CRDs, uninstall${helmSkipReason}`,
  ignore: helmMissing,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const cp = await startControlPlane({ crdDir: "" });
    const kubeconfig = cp.kubeconfigPath;
    try {
      // The namespace as config/default makes it (Pod Security labels): Helm does not own it.
      await applyNamespaces(cp, "config/default");
      await installAddonCrds(cp);

      await t.step("every object of every part passes a server-side dry run", async () => {
        const out = await helmOk([
          "template",
          RELEASE,
          CHART_DIR,
          "--namespace",
          NAMESPACE,
          "--include-crds",
          ...EVERY_PART,
        ]);
        const r = await cp.kubectl(
          ["apply", "--dry-run=server", "--server-side", "--field-manager=helm-test", "-f", "-"],
          { stdin: out },
        );
        assert.equal(r.code, 0, r.stderr);
        for (const o of parseObjects(out)) {
          assert.match(
            r.stdout,
            new RegExp(`/${o.metadata.name} serverside-applied \\(server dry run\\)`),
          );
        }
      });

      await t.step("helm install --dry-run=server", async () => {
        await helmOk(
          [
            "install",
            RELEASE,
            CHART_DIR,
            "--namespace",
            NAMESPACE,
            "--dry-run=server",
            ...EVERY_PART,
          ],
          { kubeconfig },
        );
      });

      await t.step("install: CRDs from crds/, every object owned by the release", async () => {
        await helmOk(["install", RELEASE, CHART_DIR, "--namespace", NAMESPACE], { kubeconfig });
        const deploy = JSON.parse(
          await kubectlOk(cp, [
            "-n",
            NAMESPACE,
            "get",
            "deployment",
            "cocoon-operator",
            "-o",
            "json",
          ]),
        ) as BuiltObject;
        assert.equal(deploy.metadata.annotations?.["meta.helm.sh/release-name"], RELEASE);
        assert.equal(deploy.metadata.annotations?.["meta.helm.sh/release-namespace"], NAMESPACE);
        assert.equal(deploy.metadata.labels?.["app.kubernetes.io/managed-by"], "Helm");
        await kubectlOk(cp, [
          "wait",
          "--for=condition=Established",
          "--timeout=60s",
          "crd/cocoonsets.cocoonset.cocoonstack.io",
          "crd/cocoonhibernations.cocoonset.cocoonstack.io",
        ]);
        assert.equal(await liveRegistry(cp), undefined);
      });

      await t.step(
        "upgrade keeps a `kubectl set env` OCI_REGISTRY the values do not set",
        async () => {
          await kubectlOk(cp, [
            "-n",
            NAMESPACE,
            "set",
            "env",
            "deployment/cocoon-operator",
            "OCI_REGISTRY=registry.example.com/by-hand",
          ]);
          await helmOk(
            ["upgrade", RELEASE, CHART_DIR, "--namespace", NAMESPACE, "--set", "logLevel=debug"],
            { kubeconfig },
          );
          assert.equal(await liveRegistry(cp), "registry.example.com/by-hand");
        },
      );

      await t.step(
        "a value for OCI_REGISTRY is the release's; --force-conflicts takes it over",
        async () => {
          const upgrade = (...more: string[]) =>
            helm(["upgrade", RELEASE, CHART_DIR, "--namespace", NAMESPACE, ...more], {
              kubeconfig,
            });
          // Helm 4 applies server-side: the value `kubectl set env` wrote is that manager's field,
          // and an upgrade that sets another value stops at the conflict, changing nothing.
          const refused = await upgrade("--set", "ociRegistry=registry.example.com/from-values");
          assert.notEqual(refused.code, 0);
          assert.match(refused.stderr, /conflict with "kubectl-set"[^\n]*/);
          assert.match(refused.stderr, /env\[name="OCI_REGISTRY"\]/);
          assert.equal(await liveRegistry(cp), "registry.example.com/by-hand");
          const forced = await upgrade(
            "--set",
            "ociRegistry=registry.example.com/from-values",
            "--force-conflicts",
          );
          assert.equal(forced.code, 0, forced.stderr);
          assert.equal(await liveRegistry(cp), "registry.example.com/from-values");
          // From then on the release owns it: a later `kubectl set env` is a conflict at the next
          // upgrade, which --force-conflicts settles in the release's favour.
          await kubectlOk(cp, [
            "-n",
            NAMESPACE,
            "set",
            "env",
            "deployment/cocoon-operator",
            "OCI_REGISTRY=registry.example.com/by-hand-again",
          ]);
          assert.notEqual((await upgrade("--reuse-values")).code, 0);
          assert.equal(await liveRegistry(cp), "registry.example.com/by-hand-again");
          const again = await upgrade("--reuse-values", "--force-conflicts");
          assert.equal(again.code, 0, again.stderr);
          assert.equal(await liveRegistry(cp), "registry.example.com/from-values");
        },
      );

      await t.step("helm upgrade leaves the CRDs; the documented step updates them", async () => {
        // A newer chart whose CRD changed: a field's description (an existing value, as a
        // schema change rewrites values Helm's install applied) and a new label.
        const next = await Deno.makeTempDir({ prefix: "chart-next-" });
        try {
          const copy = await new Deno.Command("cp", { args: ["-r", CHART_DIR, next] }).output();
          assert.ok(copy.success);
          const crdFile = `${next}/cocoon-operator/crds/cocoonset.cocoonstack.io_cocoonsets.yaml`;
          const text = await Deno.readTextFile(crdFile);
          const changed = text
            .replace(/^metadata:\n/m, 'metadata:\n  labels:\n    chart-next: "true"\n')
            .replace(
              "description: Kind of this object.",
              "description: Kind of this object, next.",
            );
          assert.notEqual(changed, text);
          await Deno.writeTextFile(crdFile, changed);
          const label = async () =>
            (await kubectlOk(cp, [
              "get",
              "crd",
              "cocoonsets.cocoonset.cocoonstack.io",
              "-o",
              "jsonpath={.metadata.labels.chart-next}",
            ])).trim();
          await helmOk(
            [
              "upgrade",
              RELEASE,
              `${next}/cocoon-operator`,
              "--namespace",
              NAMESPACE,
              "--reuse-values",
            ],
            { kubeconfig },
          );
          assert.equal(await label(), "", "helm upgrade changed a CRD");
          const crds = await helmOk(["show", "crds", `${next}/cocoon-operator`]);
          // Helm applied the CRDs as its own field manager; without --force-conflicts kubectl
          // stops at the changed schema.
          const plain = await cp.kubectl(["apply", "--server-side", "-f", "-"], { stdin: crds });
          assert.notEqual(plain.code, 0);
          assert.match(plain.stderr, /conflict with "helm"/);
          await kubectlOk(cp, ["apply", "--server-side", "--force-conflicts", "-f", "-"], crds);
          assert.equal(await label(), "true");
          const description = await kubectlOk(cp, [
            "get",
            "crd",
            "cocoonsets.cocoonset.cocoonstack.io",
            "-o",
            "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.kind.description}",
          ]);
          assert.equal(description.trim(), "Kind of this object, next.");
        } finally {
          await Deno.remove(next, { recursive: true });
        }
      });

      await t.step("uninstall keeps the CRDs, the custom resources and the namespace", async () => {
        await kubectlOk(cp, ["create", "namespace", "tenant-a"]);
        await kubectlOk(cp, [
          "-n",
          "tenant-a",
          "apply",
          "-f",
          `${repoRoot}examples/cocoonset-basic.yaml`,
        ]);
        await helmOk(["uninstall", RELEASE, "--namespace", NAMESPACE], { kubeconfig });
        assert.equal(await exists(cp, "-n", NAMESPACE, "deployment/cocoon-operator"), false);
        assert.equal(await exists(cp, "clusterrole/cocoon-operator-manager"), false);
        assert.equal(await exists(cp, "crd/cocoonsets.cocoonset.cocoonstack.io"), true);
        assert.equal(await exists(cp, "-n", "tenant-a", "cocoonsets"), true);
        assert.ok(
          (await kubectlOk(cp, ["-n", "tenant-a", "get", "cocoonsets", "-o", "name"])).trim(),
        );
        assert.equal(await exists(cp, `namespace/${NAMESPACE}`), true);
      });

      await t.step("a kustomize install is refused until its objects are marked", async () => {
        await kubectlOk(cp, ["apply", "-k", `${repoRoot}config/default`]);
        await kubectlOk(cp, [
          "-n",
          NAMESPACE,
          "set",
          "env",
          "deployment/cocoon-operator",
          "OCI_REGISTRY=registry.example.com/kustomized",
        ]);
        const refused = await helm(["install", RELEASE, CHART_DIR, "--namespace", NAMESPACE], {
          kubeconfig,
        });
        assert.notEqual(refused.code, 0);
        assert.match(refused.stderr, /exists and cannot be imported into the current release/);
      });

      await t.step("adopted with Helm's annotations and label, OCI_REGISTRY kept", async () => {
        for (const args of await adoptionTargets(cp)) {
          await kubectlOk(cp, [
            "annotate",
            "--overwrite",
            ...args,
            `meta.helm.sh/release-name=${RELEASE}`,
            `meta.helm.sh/release-namespace=${NAMESPACE}`,
          ]);
          await kubectlOk(cp, [
            "label",
            "--overwrite",
            ...args,
            "app.kubernetes.io/managed-by=Helm",
          ]);
        }
        await helmOk(["install", RELEASE, CHART_DIR, "--namespace", NAMESPACE], { kubeconfig });
        assert.equal(await liveRegistry(cp), "registry.example.com/kustomized");
        await helmOk(["uninstall", RELEASE, "--namespace", NAMESPACE], { kubeconfig });
        assert.equal(await exists(cp, "-n", NAMESPACE, "deployment/cocoon-operator"), false);
      });

      await t.step("adopted with --take-ownership", async () => {
        await kubectlOk(cp, ["apply", "-k", `${repoRoot}config/default`]);
        await kubectlOk(cp, [
          "-n",
          NAMESPACE,
          "set",
          "env",
          "deployment/cocoon-operator",
          "OCI_REGISTRY=registry.example.com/kustomized",
        ]);
        // A field edited by hand differs from what the chart renders: Helm 4 stops there.
        await kubectlOk(cp, [
          "-n",
          NAMESPACE,
          "set",
          "resources",
          "deployment/cocoon-operator",
          "--limits=memory=1Gi",
        ]);
        const install = [
          "install",
          RELEASE,
          CHART_DIR,
          "--namespace",
          NAMESPACE,
          "--take-ownership",
        ];
        const refused = await helm(install, { kubeconfig });
        assert.notEqual(refused.code, 0);
        assert.match(refused.stderr, /conflict with "kubectl-set"/);
        assert.match(refused.stderr, /resources\.limits\.memory/);
        // The failed install is a release already: the documented way on is an upgrade.
        const again = await helm(install, { kubeconfig });
        assert.match(again.stderr, /cannot reuse a name that is still in use/);
        await helmOk(
          [
            "upgrade",
            "--install",
            RELEASE,
            CHART_DIR,
            "--namespace",
            NAMESPACE,
            "--take-ownership",
            "--force-conflicts",
          ],
          { kubeconfig },
        );
        assert.equal(await liveRegistry(cp), "registry.example.com/kustomized");
        const limit = await kubectlOk(cp, [
          "-n",
          NAMESPACE,
          "get",
          "deployment",
          "cocoon-operator",
          "-o",
          "jsonpath={.spec.template.spec.containers[0].resources.limits.memory}",
        ]);
        assert.equal(limit.trim(), "512Mi");
        const role = JSON.parse(
          await kubectlOk(cp, ["get", "clusterrole", "cocoon-operator-manager", "-o", "json"]),
        ) as BuiltObject;
        assert.equal(role.metadata.annotations?.["meta.helm.sh/release-name"], RELEASE);
      });
    } finally {
      await cp.stop();
    }
  },
});

/**
 * `kubectl annotate` / `label` arguments for every object config/default installs that the chart
 * takes over: all but the Namespace (not the chart's) and the CRDs (crds/ is never owned).
 */
async function adoptionTargets(cp: ControlPlane): Promise<string[][]> {
  return (await kustomizeBuild(cp, "config/default"))
    .filter((o) => o.kind !== "Namespace" && o.kind !== "CustomResourceDefinition")
    .map((o) => [
      ...(o.metadata.namespace ? ["-n", o.metadata.namespace] : []),
      `${o.kind.toLowerCase()}/${o.metadata.name}`,
    ]);
}
