import assert from "node:assert/strict";
import {
  clusterAccess,
  type FileProbe,
  KubeconfigError,
  loadKubeconfig,
  locateCluster,
  NoClusterError,
} from "./kubeconfig.ts";

const vars = (v: Record<string, string>) => (name: string) => v[name];
const files = (present: string[], denied: string[] = []): FileProbe => (path) =>
  present.includes(path) ? "present" : denied.includes(path) ? "denied" : "missing";
const TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

Deno.test("locateCluster: KUBECONFIG, then in-cluster, then ~/.kube/config", () => {
  const all = files(["/k/a", TOKEN, "/home/u/.kube/config"]);
  assert.deepEqual(
    locateCluster(
      vars({ KUBECONFIG: "/k/missing:/k/a", KUBERNETES_SERVICE_HOST: "10.0.0.1" }),
      all,
    ),
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k/a"] },
  );
  assert.deepEqual(
    locateCluster(vars({ KUBERNETES_SERVICE_HOST: "10.0.0.1", HOME: "/home/u" }), all),
    {
      kind: "in-cluster",
      server: "https://kubernetes.default.svc:443",
      tokenFile: TOKEN,
      caFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    },
  );
  const inPod = locateCluster(
    vars({ KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "6443" }),
    all,
  );
  assert.equal(inPod.kind === "in-cluster" && inPod.server, "https://kubernetes.default.svc:6443");
  assert.deepEqual(locateCluster(vars({ HOME: "/home/u/" }), all), {
    kind: "kubeconfig",
    origin: "~/.kube/config",
    paths: ["/home/u/.kube/config"],
  });
});

Deno.test("locateCluster: --kubeconfig comes first and must exist (controller-runtime)", () => {
  const all = files(["/k/a", "/k/flag", TOKEN, "/home/u/.kube/config"]);
  const env = vars({ KUBECONFIG: "/k/a", KUBERNETES_SERVICE_HOST: "10.0.0.1", HOME: "/home/u" });
  assert.deepEqual(locateCluster(env, all, "/k/flag"), {
    kind: "kubeconfig",
    origin: "--kubeconfig",
    paths: ["/k/flag"],
  });
  assert.throws(
    () => locateCluster(env, all, "/k/gone"),
    /^NoClusterError: no Kubernetes cluster configured: --kubeconfig=\/k\/gone names no existing file; /,
  );
  assert.throws(
    () => locateCluster(env, files([], ["/k/secret"]), "/k/secret"),
    /--kubeconfig=\/k\/secret cannot be read/,
  );
});

Deno.test("locateCluster: nothing configured names every place tried on one line", () => {
  const err = assert.throws(
    () => locateCluster(vars({ HOME: "/home/u" }), files([])),
    (e: unknown) => {
      assert.ok(e instanceof NoClusterError);
      assert.equal(
        e.message,
        "no Kubernetes cluster configured: tried KUBECONFIG (unset), " +
          "in-cluster (KUBERNETES_SERVICE_HOST unset), " +
          "~/.kube/config (/home/u/.kube/config missing); " +
          "for a local sandbox cluster run `deno task dev`",
      );
      return true;
    },
  );
  void err;
  assert.throws(
    () => locateCluster(vars({ KUBECONFIG: "/nope" }), files([])),
    /^NoClusterError: no Kubernetes cluster configured: KUBECONFIG=\/nope names no existing file; .*deno task dev/,
  );
  assert.throws(
    () => locateCluster(vars({ KUBECONFIG: "/secret" }), files([], ["/secret"])),
    /KUBECONFIG=\/secret cannot be read \(no read permission for \/secret\)/,
  );
  assert.throws(
    () => locateCluster(vars({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }), files([], [TOKEN])),
    /in-cluster \(\/var\/run\/secrets\/kubernetes.io\/serviceaccount\/token not readable\), ~\/.kube\/config \(HOME unset\)/,
  );
});

const kubeconfigYaml = (extra = "") => `
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority: ca.crt
contexts:
- name: dev
  context: {cluster: c1, user: u1}
users:
- name: u1
  user:
    client-certificate-data: ${btoa("CERT")}
    client-key: /keys/u1.key
${extra}`;

Deno.test("loadKubeconfig: current context, relative paths, every file it will read", () => {
  const access = loadKubeconfig(
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/cfg/main"] },
    (p) => {
      assert.equal(p, "/cfg/main");
      return kubeconfigYaml();
    },
  );
  assert.equal(access.server, "https://127.0.0.1:6443");
  assert.deepEqual(access.ca, { file: "/cfg/ca.crt" });
  assert.deepEqual(access.cert, { pem: "CERT" });
  assert.deepEqual(access.key, { file: "/keys/u1.key" });
  assert.deepEqual(access.files, ["/cfg/main", "/cfg/ca.crt", "/keys/u1.key"]);
});

Deno.test("loadKubeconfig: merged files, first definition and first current-context win", () => {
  const docs: Record<string, string> = {
    "/a": `
current-context: second
users:
- name: u
  user: {tokenFile: tok}
contexts:
- name: second
  context: {cluster: c, user: u}
`,
    "/b/k": `
current-context: ignored
clusters:
- name: c
  cluster: {server: "https://10.1.1.1"}
users:
- name: u
  user: {token: from-b}
`,
  };
  const access = loadKubeconfig(
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/a", "/b/k"] },
    (p) => docs[p],
  );
  assert.equal(access.server, "https://10.1.1.1");
  assert.equal(access.token, undefined);
  assert.equal(access.tokenFile, "/tok");
  assert.deepEqual(access.files, ["/a", "/b/k", "/tok"]);
});

Deno.test("loadKubeconfig: bad exec plugins, auth-providers and TLS overrides are refused clearly", () => {
  const load = (extra: string) =>
    loadKubeconfig(
      { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] },
      () => kubeconfigYaml().replace("    client-key: /keys/u1.key\n", extra),
    );
  assert.throws(
    () => load("    exec: {command: gke-gcloud-auth-plugin, apiVersion: x}\n"),
    (e: unknown) =>
      e instanceof KubeconfigError &&
      /user u1: exec plugin gke-gcloud-auth-plugin has apiVersion "x"; supported: /.test(
        e.message,
      ),
  );
  assert.throws(() => load("    auth-provider: {name: oidc}\n"), /oidc auth-provider/);
  assert.throws(
    () =>
      loadKubeconfig(
        { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] },
        () =>
          kubeconfigYaml().replace(
            "certificate-authority: ca.crt",
            "insecure-skip-tls-verify: true",
          ),
      ),
    /sets insecure-skip-tls-verify/,
  );
  assert.throws(
    () => loadKubeconfig({ kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] }, () => "[1"),
    /cannot read kubeconfig \/k/,
  );
});

Deno.test("clusterAccess in cluster: token and CA files, nothing else", () => {
  const access = clusterAccess({
    kind: "in-cluster",
    server: "https://kubernetes.default.svc:443",
    tokenFile: "/sa/token",
    caFile: "/sa/ca.crt",
  });
  assert.deepEqual(access.files, ["/sa/token", "/sa/ca.crt"]);
  assert.equal(access.tokenFile, "/sa/token");
  assert.deepEqual(access.ca, { file: "/sa/ca.crt" });
});

Deno.test("loadKubeconfig: an empty or comment-only file in the list is an empty config (client-go)", () => {
  const docs: Record<string, string> = {
    "/empty": "",
    "/comments": "# kept for later\n\n",
    "/null": "~\n",
    "/main": kubeconfigYaml(),
  };
  const access = loadKubeconfig(
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/empty", "/comments", "/null", "/main"] },
    (p) => docs[p],
  );
  assert.equal(access.server, "https://127.0.0.1:6443");
  assert.deepEqual(access.files, [
    "/empty",
    "/comments",
    "/null",
    "/main",
    "/ca.crt",
    "/keys/u1.key",
  ]);
  // Only empty files: no current context, said as such rather than as a parse error.
  assert.throws(
    () =>
      loadKubeconfig(
        { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/empty"] },
        (p) => docs[p],
      ),
    /kubeconfig \/empty has no current-context/,
  );
});

Deno.test("loadKubeconfig: a server without scheme gets client-go's default; a bad one is a KubeconfigError", () => {
  const load = (cluster: string, user = "{token: t}") =>
    loadKubeconfig({ kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] }, () =>
      [
        "current-context: x",
        `clusters: [{name: c, cluster: ${cluster}}]`,
        `users: [{name: u, user: ${user}}]`,
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
      ].join("\n"));
  // With TLS material (a CA, or a client certificate) client-go says https, else http.
  assert.equal(
    load(`{server: "127.0.0.1:6443", certificate-authority-data: ${btoa("CA")}}`).server,
    "https://127.0.0.1:6443",
  );
  assert.equal(
    load(`{server: "localhost:6443"}`, "{client-certificate: c.crt, client-key: c.key}").server,
    "https://localhost:6443",
  );
  assert.equal(load(`{server: "localhost:6443"}`).server, "http://localhost:6443");
  for (const bad of ["ftp://10.0.0.1", "https://", "https://exa mple.com"]) {
    assert.throws(
      () => load(`{server: "${bad}"}`),
      (e: unknown) =>
        e instanceof KubeconfigError &&
        e.message === `kubeconfig cluster c has server ${JSON.stringify(bad)}, ` +
            "which is not an http(s) URL",
      bad,
    );
  }
});

Deno.test("loadKubeconfig: impersonation fields are refused, naming the field", () => {
  const load = (extra: string) =>
    loadKubeconfig(
      { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] },
      () => kubeconfigYaml().replace("    client-key: /keys/u1.key\n", extra),
    );
  for (
    const [extra, field] of [
      ["    as: admin\n", "as"],
      ["    as-uid: 1234\n", "as-uid"],
      ['    as-groups: ["system:masters"]\n', "as-groups"],
      ["    as-user-extra: {scopes: [all]}\n", "as-user-extra"],
    ]
  ) {
    assert.throws(
      () => load(extra),
      (e: unknown) =>
        e instanceof KubeconfigError &&
        new RegExp(`^kubeconfig user \\S+ sets ${field} \\(impersonation\\)`).test(e.message),
      extra,
    );
  }
  // Present but empty is what `kubectl config` writes when the field was cleared: not a refusal.
  assert.doesNotThrow(() => load('    as: ""\n    as-groups: []\n'));
});
