import assert from "node:assert/strict";
import { parseConfig } from "./config.ts";
import { configure, type LogRecord, reset } from "@logtape/logtape";
import {
  checkApiServerScheme,
  connect,
  PreflightError,
  serverVersionNotice,
  TESTED_KUBERNETES,
} from "./preflight.ts";
import { KUBERNETES_RELEASES } from "./scripts/envtest.ts";

import type { ClusterSource } from "./kube/kubeconfig.ts";
import { NetRefusedError, removeNetGuard } from "./kube/net_guard.ts";

const SOURCE: ClusterSource = { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/k"] };

Deno.test("preflight: plain http to the API server only where allowed, credentials only to loopback", () => {
  const check = (server: string, creds: { token?: string }, allowed: string[] = []) => () =>
    checkApiServerScheme({ server, source: SOURCE, ...creds }, allowed);
  assert.doesNotThrow(check("https://api.example.com", { token: "t" }));
  assert.doesNotThrow(check("http://127.0.0.1:8080", { token: "t" }));
  assert.doesNotThrow(check("http://localhost:8080", {}));
  assert.throws(
    check("http://api.example.com:8080", {}),
    (e: unknown) =>
      e instanceof PreflightError &&
      /is plain http: use https, or allow it with --allow-plain-http=api\.example\.com:8080/.test(
        e.message,
      ),
  );
  assert.doesNotThrow(check("http://api.example.com:8080", {}, ["api.example.com:8080"]));
  assert.throws(
    check("http://api.example.com:8080", { token: "secret" }, ["api.example.com"]),
    (e: unknown) =>
      e instanceof PreflightError && /refusing to send credentials/.test(e.message) &&
      !e.message.includes("secret"),
  );
});

Deno.test("preflight: an exec plugin's credentials never go to a plain-http API server off loopback", () => {
  const exec = {
    user: "u",
    command: "/opt/bin/auth-plugin",
    args: [],
    env: [],
    apiVersion: "client.authentication.k8s.io/v1" as const,
    provideClusterInfo: false,
  };
  assert.throws(
    () =>
      checkApiServerScheme({ server: "http://api.example.com:8080", source: SOURCE, exec }, [
        "api.example.com:8080",
      ]),
    (e: unknown) => e instanceof PreflightError && /refusing to send credentials/.test(e.message),
  );
  assert.doesNotThrow(() =>
    checkApiServerScheme({ server: "http://127.0.0.1:8080", source: SOURCE, exec }, [])
  );
});

/** A loopback API server answering GET /version, and a kubeconfig for it. */
async function withApiServer(
  fn: (kubeconfig: string) => Promise<void>,
  version: () => Response = () => Response.json({ major: "1", minor: "31" }),
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, version);
  const dir = await Deno.makeTempDir();
  try {
    const kubeconfig = `${dir}/config`;
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: `http://127.0.0.1:${server.addr.port}` } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    await fn(kubeconfig);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("preflight: extra permissions stop the start unless accepted on purpose", async () => {
  await withApiServer(async (kubeconfig) => {
    const env: Record<string, string> = {
      KUBECONFIG: kubeconfig,
      OCI_REGISTRY: "127.0.0.1:5000/c",
    };
    const lookup = (name: string) => env[name];
    const all = () => "granted" as const;
    await assert.rejects(
      () => connect(parseConfig(["--leader-elect=false"], env), lookup, { queryExtra: all }),
      (e: unknown) =>
        e instanceof PreflightError &&
        /^the operator holds Deno permissions it must not have: --allow-run, --allow-write/.test(
          e.message,
        ),
    );
    const accepted = await connect(
      parseConfig(["--leader-elect=false", "--allow-extra-permissions"], env),
      lookup,
      { queryExtra: all },
    );
    accepted.close();
    // Nothing extra held: it starts.
    const scoped = await connect(parseConfig(["--leader-elect=false"], env), lookup, {
      queryExtra: () => "prompt",
    });
    scoped.close();
  });
});

Deno.test("preflight: a proxy variable the sandbox does not name stops the start, naming it", async () => {
  await withApiServer(async (kubeconfig) => {
    const env: Record<string, string> = {
      KUBECONFIG: kubeconfig,
      OCI_REGISTRY: "127.0.0.1:5000/c",
      HTTPS_PROXY: "http://127.0.0.1:18555",
    };
    // Every need granted except the proxy, as a sandbox without it would answer.
    const query = (d: Deno.PermissionDescriptor): Deno.PermissionState =>
      d.name === "net" && d.host === "127.0.0.1:18555" ? "prompt" : "granted";
    await assert.rejects(
      () => connect(parseConfig(["--leader-elect=false"], env), (n) => env[n], { query }),
      (e: unknown) =>
        e instanceof PreflightError &&
        e.message.startsWith("missing Deno permissions: --allow-net=127.0.0.1:18555 (HTTPS_PROXY)"),
    );
    env.HTTPS_PROXY = "::";
    await assert.rejects(
      () => connect(parseConfig(["--leader-elect=false"], env), (n) => env[n], { query }),
      (e: unknown) => e instanceof PreflightError && /^HTTPS_PROXY is set/.test(e.message),
    );
  });
});

Deno.test("preflight: run access to the kubeconfig's exec plugin is not extra; any other run is", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => Response.json({ major: "1", minor: "31" }),
  );
  const dir = await Deno.makeTempDir();
  try {
    // Named like a probed program on purpose: `kubectl oidc-login` is a common exec plugin.
    const plugin = `${dir}/kubectl`;
    await Deno.writeTextFile(
      plugin,
      '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1",' +
        '"kind":"ExecCredential","status":{"token":"t"}}\'\n',
      { mode: 0o755 },
    );
    const kubeconfig = `${dir}/config`;
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: `http://127.0.0.1:${server.addr.port}` } }],
        users: [{
          name: "u",
          user: {
            exec: {
              command: plugin,
              args: ["oidc-login", "get-token"],
              apiVersion: "client.authentication.k8s.io/v1",
              interactiveMode: "Never",
            },
          },
        }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const env: Record<string, string> = {
      KUBECONFIG: kubeconfig,
      OCI_REGISTRY: "127.0.0.1:5000/c",
    };
    const config = parseConfig(["--leader-elect=false"], env);
    const lookup = (name: string) => env[name];
    // What Deno answers under --allow-run=<the plugin's path> (a bare name resolves through PATH).
    const onlyThePlugin = (d: Deno.PermissionDescriptor): Deno.PermissionState =>
      d.name === "run" && (d.command === plugin || d.command === "kubectl") ? "granted" : "prompt";
    const transport = await connect(config, lookup, { queryExtra: onlyThePlugin });
    transport.close();
    const alsoSh = (d: Deno.PermissionDescriptor): Deno.PermissionState =>
      d.name === "run" && d.command === "sh" ? "granted" : onlyThePlugin(d);
    await assert.rejects(
      () => connect(config, lookup, { queryExtra: alsoSh }),
      (e: unknown) =>
        e instanceof PreflightError &&
        /must not have: --allow-run=sh;/.test(e.message) && !e.message.includes("kubectl"),
    );
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("preflight: guardNet puts the operator's allow-list in front of every fetch", async () => {
  await withApiServer(async (kubeconfig) => {
    const env: Record<string, string> = {
      KUBECONFIG: kubeconfig,
      OCI_REGISTRY: "127.0.0.1:5000/c",
      OPERATOR_ALLOW_NET: "*.blobs.invalid:443",
    };
    const transport = await connect(parseConfig(["--leader-elect=false"], env), (n) => env[n], {
      queryExtra: () => "prompt",
      guardNet: true,
    });
    try {
      // The API server it just reached is on the list; a host it never needs is not, nor a
      // second label under an OPERATOR_ALLOW_NET wildcard.
      await assert.rejects(
        () => fetch("http://127.0.0.1:5001/v2/"),
        (e: unknown) => e instanceof NetRefusedError && /127\.0\.0\.1:5001/.test(e.message),
      );
      await assert.rejects(
        () => fetch("https://a.b.blobs.invalid/x"),
        (e: unknown) =>
          e instanceof NetRefusedError &&
          /rule \*\.blobs\.invalid:443 matches exactly one label/.test(e.message),
      );
    } finally {
      transport.close();
      removeNetGuard();
    }
  });
});

Deno.test("preflight: the server's release is logged, with a warning outside the tested range", () => {
  const at = "https://api.example.com";
  const notice = (gitVersion: string, major: number, minor: number) =>
    serverVersionNotice({ version: { gitVersion, major, minor } }, at);
  for (const [git, minor] of [["v1.33.13", 33], ["v1.35.4", 35], ["v1.37.2", 37]] as const) {
    const n = notice(git, 1, minor);
    assert.equal(n.level, "info", git);
    assert.equal(n.message, "Kubernetes API server {server} runs {version}");
    assert.deepEqual(n.properties, { server: at, version: git, range: "1.33–1.37" });
  }
  const old = notice("v1.32.9-eks-1a2b3c", 1, 32);
  assert.equal(old.level, "warning");
  assert.match(
    old.message,
    /older than the tested range \{range\}; README\.md "Kubernetes versions"/,
  );
  const newer = notice("v1.38.0", 1, 38);
  assert.equal(newer.level, "warning");
  assert.match(newer.message, /newer than the tested range/);
  const unknown = serverVersionNotice({ status: 403 }, at);
  assert.equal(unknown.level, "warning");
  assert.deepEqual(unknown.properties, { server: at, status: 403, range: "1.33–1.37" });
});

Deno.test("preflight: the tested range is the oldest and newest release envtest builds", () => {
  const minors = Object.keys(KUBERNETES_RELEASES).map((m) => Number(m.split(".")[1])).sort(
    (a, b) => a - b,
  );
  assert.equal(TESTED_KUBERNETES.oldest.minor, minors[0]);
  assert.equal(TESTED_KUBERNETES.newest.minor, minors[minors.length - 1]);
});

Deno.test("preflight: connect logs the release GET /version named, without a second request", async () => {
  const records: LogRecord[] = [];
  await configure({
    sinks: { capture: (r: LogRecord) => records.push(r) },
    loggers: [
      { category: ["cocoon-operator"], lowestLevel: "debug", sinks: ["capture"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: [] },
    ],
    reset: true,
  });
  try {
    for (
      const [answer, level, text] of [
        [{ major: "1", minor: "31", gitVersion: "v1.31.4" }, "warning", /runs v1\.31\.4, older/],
        [{ major: "1", minor: "36", gitVersion: "v1.36.3" }, "info", /runs v1\.36\.3$/],
      ] as const
    ) {
      records.length = 0;
      let requests = 0;
      await withApiServer(async (kubeconfig) => {
        const env: Record<string, string> = {
          KUBECONFIG: kubeconfig,
          OCI_REGISTRY: "127.0.0.1:5000/c",
        };
        const transport = await connect(parseConfig(["--leader-elect=false"], env), (n) => env[n], {
          queryExtra: () => "prompt",
        });
        transport.close();
      }, () => {
        requests++;
        return Response.json(answer);
      });
      assert.equal(requests, 1);
      const lines = records.filter((r) => r.rawMessage.toString().includes("Kubernetes API server"))
        .map((r) => ({ level: r.level, text: r.message.join("") }));
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.equal(lines[0].level, level);
      assert.match(lines[0].text, text);
    }
  } finally {
    await reset();
  }
});
