import assert from "node:assert/strict";
import {
  DEFAULT_REGISTRY_HOSTS,
  describeExtra,
  describeMissing,
  extraPermissions,
  inClusterPermissionSet,
  localPermissionSet,
  missingPermissions,
  type NeedsInput,
  netAllowEntries,
  operatorNeeds,
  permissionFlags,
  ProxyVariableError,
} from "./permissions.ts";
import { LOCAL_ONLY_ENV, OPERATOR_ENV } from "./operator_env.ts";

const IN_CLUSTER = {
  kind: "in-cluster",
  server: "https://kubernetes.default.svc:443",
  tokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
  caFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
} as const;

const podInput = (
  env: Record<string, string> = {},
  ociRegistry = "europe-docker.pkg.dev/p/r",
): NeedsInput => ({
  config: {
    ociRegistry,
    metricsBindAddress: ":8080",
    healthProbeBindAddress: ":8081",
    leaderElect: true,
    leaderElectionNamespace: undefined,
  },
  cluster: {
    source: IN_CLUSTER,
    server: IN_CLUSTER.server,
    files: [IN_CLUSTER.tokenFile, IN_CLUSTER.caFile],
  },
  env: (name) => env[name],
});

/** Grants exactly a PermissionSet the way Deno reads --allow-* lists (incl. *.domain, folders). */
function grantedBy(set: { net: string[]; read: string[]; env: string[] }) {
  return (d: Deno.PermissionDescriptor): Deno.PermissionState => {
    if (d.name === "env") return set.env.includes(d.variable ?? "") ? "granted" : "prompt";
    if (d.name === "read") {
      const p = String(d.path);
      return set.read.some((r) => p === r || p.startsWith(`${r}/`)) ? "granted" : "prompt";
    }
    if (d.name === "net") {
      const want = d.host ?? "";
      const [host, port] = want.split(/:(?=\d+$)/);
      return set.net.some((entry) => {
          const [eh, ep] = entry.split(/:(?=\d+$)/);
          const hostOk = eh.startsWith("*.")
            ? host === eh.slice(2) || host.endsWith(eh.slice(1))
            : host === eh;
          return hostOk && (ep === undefined || ep === port);
        })
        ? "granted"
        : "prompt";
    }
    return "prompt";
  };
}

Deno.test("in-cluster set: exactly API server, registry hosts, Google tokens, listeners", () => {
  const set = inClusterPermissionSet();
  assert.deepEqual(set.net, [
    "kubernetes.default.svc:443",
    "*.pkg.dev:443",
    "169.254.169.254:80",
    "oauth2.googleapis.com:443",
    "0.0.0.0:8080",
    "0.0.0.0:8081",
  ]);
  assert.deepEqual(set.read, [
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/var/run/secrets/gcp",
    "/var/run/secrets/docker",
    "/var/run/secrets/metrics-cert",
  ]);
  assert.deepEqual(set.env, [...OPERATOR_ENV]);
  assert.ok(!set.env.includes("HOME"));
  assert.deepEqual(DEFAULT_REGISTRY_HOSTS, ["*.pkg.dev:443"]);
  assert.deepEqual(
    inClusterPermissionSet(["registry.example.com:5000"]).net[1],
    "registry.example.com:5000",
  );
  assert.throws(() => inClusterPermissionSet([]), /at least one registry host/);
  assert.throws(() => inClusterPermissionSet(["https://x"]), /invalid registry host/);
});

Deno.test("permission flags: three scoped flags, never all/write/run/ffi/sys", () => {
  const flags = permissionFlags(inClusterPermissionSet());
  assert.equal(flags.length, 3);
  assert.match(flags[0], /^--allow-net=kubernetes\.default\.svc:443,\*\.pkg\.dev:443,/);
  assert.match(flags[1], /^--allow-read=\/var\/run\/secrets\/kubernetes\.io\/serviceaccount,/);
  assert.match(flags[2], /^--allow-env=OCI_REGISTRY,/);
  for (const f of flags) assert.doesNotMatch(f, /--allow-(all|write|run|ffi|sys)|^-A$/);
  assert.deepEqual(permissionFlags({ net: ["a", "a"], read: [], env: [] }), ["--allow-net=a"]);
  assert.throws(() => permissionFlags({ net: ["a,b"], read: [], env: [] }), /invalid net entry/);
});

Deno.test("a pod with the default deployment needs nothing the baked set lacks", () => {
  const needs = operatorNeeds(
    podInput({ GOOGLE_APPLICATION_CREDENTIALS: "/var/run/secrets/gcp/key.json" }),
  );
  assert.deepEqual(missingPermissions(needs, grantedBy(inClusterPermissionSet())), []);
  // The Secret-mounted Docker config is covered as well.
  const docker = operatorNeeds(podInput({ DOCKER_CONFIG: "/var/run/secrets/docker" }));
  assert.deepEqual(missingPermissions(docker, grantedBy(inClusterPermissionSet())), []);
});

Deno.test("OCI_REGISTRY elsewhere, moved listeners and key files are named as missing", () => {
  const input = podInput({ GOOGLE_APPLICATION_CREDENTIALS: "/etc/key.json" }, "ghcr.io/acme/vms");
  input.config.metricsBindAddress = "127.0.0.1:9090";
  const missing = missingPermissions(operatorNeeds(input), grantedBy(inClusterPermissionSet()));
  assert.deepEqual(missing.map((n) => `${n.kind}:${n.value}`), [
    "net:127.0.0.1:9090",
    "net:ghcr.io:443",
  ]);
  // A Go Deployment's registry outside the image's hosts: the line says to rebuild for it.
  const registryOnly = missingPermissions(
    operatorNeeds(podInput({}, "ghcr.io/acme/vms")),
    grantedBy(inClusterPermissionSet()),
  );
  assert.equal(
    describeMissing(registryOnly),
    "missing Deno permissions: --allow-net=ghcr.io:443 (OCI_REGISTRY); the image reaches only " +
      "the registry hosts it was built with: build it with REGISTRY_HOSTS including " +
      'ghcr.io:443 (docs/installation.md, "Registry hosts"); the permission set is described ' +
      "in docs/configuration.md",
  );
  // Not a Google host: the key file and token endpoints are not needed at all.
  const google = podInput({ GOOGLE_APPLICATION_CREDENTIALS: "/etc/key.json" });
  const line = describeMissing(
    missingPermissions(operatorNeeds(google), grantedBy(inClusterPermissionSet())),
  );
  assert.equal(
    line,
    "missing Deno permissions: --allow-read=/etc/key.json (GOOGLE_APPLICATION_CREDENTIALS); " +
      "the permission set is described in docs/configuration.md",
  );
  assert.ok(!line.includes("\n"));
});

Deno.test("local set: kubeconfig API server and files, registry as written, home credentials", () => {
  const set = localPermissionSet({
    config: {
      ociRegistry: "127.0.0.1:5000/cocoon",
      metricsBindAddress: "0",
      healthProbeBindAddress: "[::1]:8081",
      leaderElect: false,
      leaderElectionNamespace: undefined,
    },
    cluster: {
      source: { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k/config"] },
      server: "https://127.0.0.1:6443",
      files: ["/k/config", "/k/ca.crt"],
    },
    env: (name) => ({ HOME: "/home/dev/" } as Record<string, string>)[name],
  });
  assert.deepEqual(set.net, ["[::1]:8081", "127.0.0.1:6443", "127.0.0.1:5000"]);
  assert.deepEqual(set.read, ["/k/config", "/k/ca.crt", "/home/dev/.docker/config.json"]);
  assert.deepEqual(set.env, [...OPERATOR_ENV, ...LOCAL_ONLY_ENV]);
});

Deno.test("missingPermissions asks the real Deno permission state", () => {
  // This test runs with -A: every need is granted, and the query is the real one.
  assert.deepEqual(missingPermissions(operatorNeeds(podInput())), []);
});

Deno.test("the baked flags, checked by Deno itself: a pod needs nothing more, others are refused", async () => {
  const probe = new URL("./tests/harness/sandbox_probe.ts", import.meta.url).pathname;
  const run = async (ociRegistry: string, forbidden?: string) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-prompt",
        ...permissionFlags(inClusterPermissionSet()),
        probe,
        ociRegistry,
        ...(forbidden ? [forbidden] : []),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return JSON.parse(new TextDecoder().decode(out.stdout));
  };
  assert.deepEqual(await run("europe-docker.pkg.dev/proj/vms"), { missing: [], results: {} });
  const elsewhere = await run("registry.example.com/vms", "http://127.0.0.1:49151/");
  assert.deepEqual(elsewhere, {
    missing: ["net:registry.example.com:443"],
    results: { "http://127.0.0.1:49151/": "NotCapable" },
  });
});

Deno.test("a key file's own token_uri is a need: an old key's endpoint is named, not hit at run time", () => {
  const oldKey = JSON.stringify({
    type: "service_account",
    client_email: "op@p.iam.gserviceaccount.com",
    private_key: "-----BEGIN PRIVATE KEY-----\n...",
    token_uri: "https://accounts.google.com/o/oauth2/token",
  });
  const keyPath = "/var/run/secrets/gcp/key.json";
  const input = (text: string): NeedsInput => ({
    ...podInput({ GOOGLE_APPLICATION_CREDENTIALS: keyPath }),
    readText: (path) => {
      assert.equal(path, keyPath);
      return text;
    },
  });
  const missing = missingPermissions(
    operatorNeeds(input(oldKey)),
    grantedBy(inClusterPermissionSet()),
  );
  assert.deepEqual(missing.map((n) => `${n.kind}:${n.value} (${n.why})`), [
    "net:accounts.google.com:443 (token_uri of GOOGLE_APPLICATION_CREDENTIALS)",
  ]);
  // A current key names Google's default endpoint, which the baked set has.
  const current = oldKey.replace("accounts.google.com/o/oauth2", "oauth2.googleapis.com");
  assert.deepEqual(
    missingPermissions(operatorNeeds(input(current)), grantedBy(inClusterPermissionSet())),
    [],
  );
  // An unreadable or broken file adds nothing beyond the read need itself.
  const unreadable: NeedsInput = {
    ...podInput({ GOOGLE_APPLICATION_CREDENTIALS: keyPath }),
    readText: () => {
      throw new Deno.errors.NotCapable("no");
    },
  };
  assert.deepEqual(
    missingPermissions(operatorNeeds(unreadable), grantedBy(inClusterPermissionSet())),
    [],
  );
  // Locally, gcloud's ADC file is the one the chain reads when no key file is named.
  const adc = "/home/dev/.config/gcloud/application_default_credentials.json";
  const local = localPermissionSet({
    ...podInput({ HOME: "/home/dev" }),
    readText: (path) => {
      assert.equal(path, adc);
      return JSON.stringify({
        type: "authorized_user",
        refresh_token: "r",
        token_uri: "https://oauth2.example.com:8443/token",
      });
    },
  });
  assert.ok(local.net.includes("oauth2.example.com:8443"), local.net.join(","));
});

Deno.test("a build for registries that are never Google's gets no Google endpoint or key folder", () => {
  const other = inClusterPermissionSet(["registry.example.com", "*.example.org:5000"]);
  assert.deepEqual(other.net, [
    "kubernetes.default.svc:443",
    "registry.example.com:443",
    "*.example.org:5000",
    "0.0.0.0:8080",
    "0.0.0.0:8081",
  ]);
  assert.deepEqual(other.read, [
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/var/run/secrets/docker",
    "/var/run/secrets/metrics-cert",
  ]);
  // The operator needs nothing more for such a registry.
  assert.deepEqual(
    missingPermissions(
      operatorNeeds(podInput({}, "registry.example.com/vms")),
      grantedBy(other),
    ),
    [],
  );
  // Any entry that may name a Google host keeps them: the host itself or a wider wildcard.
  for (const hosts of [["gcr.io"], ["eu.gcr.io:443"], ["*.pkg.dev"], ["*.dev"], ["*.google.com"]]) {
    const set = inClusterPermissionSet(["registry.example.com", ...hosts]);
    assert.ok(set.net.includes("169.254.169.254:80"), hosts.join());
    assert.ok(set.net.includes("oauth2.googleapis.com:443"), hosts.join());
    assert.ok(set.read.includes("/var/run/secrets/gcp"), hosts.join());
  }
});

Deno.test("every --allow-net entry the project produces has a port", () => {
  const hasPort = (e: string) => /:\d+$/.test(e);
  for (
    const hosts of [
      undefined,
      ["registry.example.com"],
      ["*.example.org"],
      ["[fd00::1]"],
      ["registry.example.com:5000"],
    ]
  ) {
    const set = inClusterPermissionSet(hosts);
    assert.deepEqual(set.net.filter((e) => !hasPort(e)), [], set.net.join(","));
  }
  assert.ok(
    inClusterPermissionSet(["registry.example.com"]).net.includes("registry.example.com:443"),
  );
  assert.ok(inClusterPermissionSet(["*.example.org"]).net.includes("*.example.org:443"));
  // The registry need: https's port unless plain http was allowed for that host.
  const net = (ociRegistry: string, plainHttpHosts?: string[]) =>
    operatorNeeds({ ...podInput({}, ociRegistry), plainHttpHosts })
      .filter((n) => n.why === "OCI_REGISTRY").map((n) => n.value);
  assert.deepEqual(net("registry.example.com/vms"), ["registry.example.com:443"]);
  assert.deepEqual(net("registry.example.com:5000/vms"), ["registry.example.com:5000"]);
  assert.deepEqual(net("10.0.0.5/vms", ["10.0.0.5"]), ["10.0.0.5:80"]);
  const local = localPermissionSet(podInput({}, "ghcr.io/acme/vms"));
  assert.deepEqual(local.net.filter((e) => !hasPort(e)), [], local.net.join(","));
});

Deno.test("a proxy variable is a net need naming the variable; a granted proxy passes", () => {
  const baked = grantedBy(inClusterPermissionSet());
  const missing = missingPermissions(
    operatorNeeds(podInput({ HTTPS_PROXY: "http://proxy.corp:3128", http_proxy: "10.0.0.9" })),
    baked,
  );
  assert.deepEqual(missing.map((n) => `${n.value} (${n.why})`), [
    "proxy.corp:3128 (HTTPS_PROXY)",
    "10.0.0.9:80 (http_proxy)",
  ]);
  assert.match(
    describeMissing(missing),
    /--allow-net=proxy\.corp:3128,10\.0\.0\.9:80 \(HTTPS_PROXY, http_proxy\)/,
  );
  // Built with the proxy on purpose: nothing is missing.
  const withProxy = grantedBy(
    inClusterPermissionSet(undefined, { proxyHosts: ["proxy.corp:3128", "10.0.0.9"] }),
  );
  assert.deepEqual(
    missingPermissions(
      operatorNeeds(podInput({ HTTPS_PROXY: "http://proxy.corp:3128", http_proxy: "10.0.0.9" })),
      withProxy,
    ),
    [],
  );
  assert.deepEqual(
    operatorNeeds(podInput({ ALL_PROXY: "socks5://s.corp" })).filter((n) => n.why === "ALL_PROXY")
      .map((n) => n.value),
    ["s.corp:1080"],
  );
  assert.throws(
    () => operatorNeeds(podInput({ HTTP_PROXY: "http://" })),
    (e: unknown) => e instanceof ProxyVariableError && /^HTTP_PROXY is set/.test(e.message),
  );
  for (const v of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"]) {
    assert.ok(OPERATOR_ENV.includes(v), v);
  }
});

Deno.test("extraPermissions names every grant beyond the operator's set", () => {
  const grants = (granted: (d: Deno.PermissionDescriptor) => boolean) =>
  (
    d: Deno.PermissionDescriptor,
  ): Deno.PermissionState => granted(d) ? "granted" : "prompt";
  // The in-cluster set: scoped net/read/env only; nothing extra.
  assert.deepEqual(extraPermissions({}, grantedBy(inClusterPermissionSet())), []);
  // -A: everything.
  const all = extraPermissions({}, grants(() => true));
  assert.deepEqual(all, [
    "--allow-run",
    "--allow-write",
    "--allow-ffi",
    "--allow-import",
    "--allow-net",
    "--allow-read",
    "--allow-env",
    "--allow-sys",
  ]);
  // Scoped grants that are still extra, and hostname, which is not.
  const scoped = extraPermissions(
    {},
    grants((d) =>
      (d.name === "run" && d.command === "sh") || (d.name === "write" && d.path === "/tmp") ||
      (d.name === "sys" && (d.kind === "hostname" || d.kind === "uid"))
    ),
  );
  assert.deepEqual(scoped, ["--allow-run=sh", "--allow-write=/tmp", "--allow-sys=uid"]);
  // An allowed program (an exec plugin in a local run) is not extra.
  assert.deepEqual(
    extraPermissions(
      { run: ["/usr/bin/gke-gcloud-auth-plugin", "sh"] },
      grants((d) => d.name === "run" && d.command === "sh"),
    ),
    [],
  );
  const line = describeExtra(all);
  assert.match(line, /^the operator holds Deno permissions it must not have: --allow-run, /);
  assert.match(line, /--allow-extra-permissions \(OPERATOR_ALLOW_EXTRA_PERMISSIONS=true\)/);
  // This test runs under -A: the real query sees it.
  assert.ok(extraPermissions().includes("--allow-write"));
});

Deno.test("an exec plugin user needs run for that one program and PATH; in cluster never run", () => {
  const input: NeedsInput = {
    config: {
      ociRegistry: "127.0.0.1:5000/cocoon",
      metricsBindAddress: "0",
      healthProbeBindAddress: "0",
      leaderElect: false,
      leaderElectionNamespace: undefined,
    },
    cluster: {
      source: { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k/config"] },
      server: "https://127.0.0.1:6443",
      files: ["/k/config"],
      exec: {
        user: "u",
        command: "gke-gcloud-auth-plugin",
        args: [],
        env: [],
        apiVersion: "client.authentication.k8s.io/v1beta1",
        provideClusterInfo: true,
      },
    },
    env: () => undefined,
  };
  const needs = operatorNeeds(input);
  assert.deepEqual(needs.filter((n) => n.kind === "run"), [
    { kind: "run", value: "gke-gcloud-auth-plugin", why: "exec credential plugin" },
  ]);
  assert.ok(needs.some((n) => n.kind === "env" && n.value === "PATH"));
  const set = localPermissionSet(input);
  assert.deepEqual(set.run, ["gke-gcloud-auth-plugin"]);
  assert.ok(permissionFlags(set).includes("--allow-run=gke-gcloud-auth-plugin"));
  // The start-up check names a missing run grant like any other.
  const missing = missingPermissions(needs, (d) => d.name === "run" ? "prompt" : "granted");
  assert.equal(
    describeMissing(missing),
    "missing Deno permissions: --allow-run=gke-gcloud-auth-plugin (exec credential plugin); " +
      "the permission set is described in docs/configuration.md",
  );
  // Without a plugin no run need at all, in cluster or local.
  assert.ok(!operatorNeeds(podInput()).some((n) => n.kind === "run"));
  assert.equal(inClusterPermissionSet().run, undefined);
  assert.ok(!permissionFlags(inClusterPermissionSet()).some((f) => f.startsWith("--allow-run")));
});

Deno.test("the operator's allow-list is its net needs: exact host:port, OPERATOR_ALLOW_NET added", () => {
  const needs = operatorNeeds(
    podInput({ OPERATOR_ALLOW_NET: "auth.example.com, *.blobs.example.com:8443" }),
  );
  assert.deepEqual(netAllowEntries(needs), [
    "0.0.0.0:8080",
    "0.0.0.0:8081",
    "kubernetes.default.svc:443",
    "europe-docker.pkg.dev:443",
    "auth.example.com:443",
    "*.blobs.example.com:8443",
    "169.254.169.254:80",
    "oauth2.googleapis.com:443",
  ]);
  // The same entries go into the local --allow-net, so the two lists cannot drift apart.
  const local = localPermissionSet(
    podInput({ OPERATOR_ALLOW_NET: "auth.example.com, *.blobs.example.com:8443" }),
  );
  assert.deepEqual(local.net, netAllowEntries(needs));
  // Deno cannot be asked about a wildcard: the guard enforces it, the start-up check skips it.
  const asked: string[] = [];
  missingPermissions(needs, (d) => {
    if (d.name === "net") asked.push(d.host ?? "");
    return "granted";
  });
  assert.ok(!asked.some((h) => h.startsWith("*.")));
  assert.throws(
    () => operatorNeeds(podInput({ OPERATOR_ALLOW_NET: "https://auth.example.com" })),
    (err: unknown) =>
      err instanceof ProxyVariableError && /OPERATOR_ALLOW_NET entry/.test(err.message),
  );
});
