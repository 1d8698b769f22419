import assert from "node:assert/strict";
import { configure, type LogRecord, reset } from "@logtape/logtape";
import {
  type ExecConfig,
  ExecConfigError,
  ExecCredentialSource,
  ExecPluginError,
  parseExecConfig,
  parseExecCredential,
} from "./exec_credential.ts";
import { restConfigFor, Transport } from "./transport.ts";
import { loadKubeconfig } from "./kubeconfig.ts";

const V1 = "client.authentication.k8s.io/v1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";

function credential(apiVersion: string, status: Record<string, unknown>): string {
  return JSON.stringify({ kind: "ExecCredential", apiVersion, status });
}

/** A temp folder with an executable shell script in it; the script's path is returned. */
async function script(dir: string, name: string, body: string): Promise<string> {
  const path = `${dir}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

function config(command: string, extra: Partial<ExecConfig> = {}): ExecConfig {
  return {
    user: "dev",
    command,
    args: [],
    env: [],
    apiVersion: V1,
    provideClusterInfo: false,
    ...extra,
  };
}

Deno.test("parseExecCredential: v1 and v1beta1 tokens and certificate pairs", () => {
  assert.deepEqual(parseExecCredential(credential(V1, { token: "t1" }), V1), { token: "t1" });
  assert.deepEqual(
    parseExecCredential(
      credential(V1BETA1, {
        token: "t2",
        expirationTimestamp: "2030-01-02T03:04:05Z",
      }),
      V1BETA1,
    ),
    { token: "t2", expiresAt: Date.parse("2030-01-02T03:04:05Z") },
  );
  assert.deepEqual(
    parseExecCredential(
      credential(V1, { clientCertificateData: "CERT", clientKeyData: "KEY" }),
      V1,
    ),
    { certPem: "CERT", keyPem: "KEY" },
  );
});

Deno.test("parseExecCredential: the returned apiVersion, kind and status are checked", () => {
  const refused = (text: string, pattern: RegExp) =>
    assert.throws(
      () => parseExecCredential(text, V1),
      (e: unknown) => e instanceof ExecPluginError && pattern.test(e.message),
    );
  refused(
    credential(V1BETA1, { token: "secret-tok" }),
    /configured to use API version .*\/v1, but returned version ".*v1beta1"/,
  );
  refused(JSON.stringify({ kind: "Pod", apiVersion: V1 }), /kind "Pod", want ExecCredential/);
  refused(JSON.stringify({ kind: "ExecCredential", apiVersion: V1 }), /did not return a status/);
  refused(credential(V1, {}), /did not return a token or a certificate\/key pair/);
  refused(credential(V1, { clientCertificateData: "C" }), /only a certificate or only a key/);
  refused(credential(V1, { token: "t", expirationTimestamp: "soon" }), /not a timestamp/);
  refused("token: secret-tok", /not a JSON ExecCredential/);
  // The credential itself never appears in a message.
  try {
    parseExecCredential(credential(V1BETA1, { token: "secret-tok" }), V1);
  } catch (err) {
    assert.ok(!String(err).includes("secret-tok"));
  }
});

Deno.test("parseExecConfig: apiVersion, interactiveMode, args, env and the command's path", () => {
  const ok = parseExecConfig(
    "u",
    {
      command: "bin/plugin",
      apiVersion: V1,
      interactiveMode: "Never",
      args: ["get-token", "--cluster", "c"],
      env: [{ name: "AWS_PROFILE", value: "dev" }],
      installHint: "install it\nfrom the vendor",
      provideClusterInfo: true,
    },
    "/home/u/.kube",
    [{ name: "client.authentication.k8s.io/exec", extension: { a: 1 } }],
  );
  assert.deepEqual(ok, {
    user: "u",
    command: "/home/u/.kube/bin/plugin",
    args: ["get-token", "--cluster", "c"],
    env: [{ name: "AWS_PROFILE", value: "dev" }],
    apiVersion: V1,
    provideClusterInfo: true,
    installHint: "install it\nfrom the vendor",
    clusterConfig: { a: 1 },
  });
  // A bare name stays a PATH lookup; v1beta1 defaults interactiveMode to IfAvailable.
  assert.equal(
    parseExecConfig("u", { command: "gke-gcloud-auth-plugin", apiVersion: V1BETA1 }, "/k").command,
    "gke-gcloud-auth-plugin",
  );
  const refused = (exec: Record<string, unknown>, pattern: RegExp) =>
    assert.throws(
      () => parseExecConfig("u", exec, "/k"),
      (e: unknown) => e instanceof ExecConfigError && pattern.test(e.message),
    );
  refused(
    { command: "p", apiVersion: V1, interactiveMode: "Always" },
    /kubeconfig user u: exec plugin p sets interactiveMode: Always, but the operator has no terminal/,
  );
  refused({ command: "p", apiVersion: V1 }, /interactiveMode must be set/);
  refused({ command: "p", apiVersion: "client.authentication.k8s.io/v1alpha1" }, /supported: /);
  refused({ apiVersion: V1 }, /has no command/);
  refused({ command: "p", apiVersion: V1BETA1, args: [1] }, /args must be a list of strings/);
  refused({ command: "p", apiVersion: V1BETA1, env: [{ value: "x" }] }, /env entries need a name/);
  for (const shell of ["/bin/sh", "bash", "deno", "/usr/bin/python3.12", "env"]) {
    refused({ command: shell, apiVersion: V1BETA1 }, /shell, interpreter or launcher/);
  }
});

Deno.test("loadKubeconfig: an exec user gives the access an exec config; a token wins", () => {
  const yaml = (user: string) => `
current-context: c
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: x}
contexts:
- name: c
  context: {cluster: c, user: u}
users:
- name: u
  user:
${user}`;
  const exec = "    exec: {command: ./plug, apiVersion: " + V1BETA1 + "}\n";
  const access = loadKubeconfig(
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/home/k/config"] },
    () => yaml(exec),
  );
  assert.equal(access.exec?.command, "/home/k/plug");
  assert.deepEqual(access.exec?.clusterConfig, { audience: "x" });
  const withToken = loadKubeconfig(
    { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/home/k/config"] },
    () => yaml(exec + "    token: t\n"),
  );
  assert.equal(withToken.exec, undefined);
  assert.equal(withToken.token, "t");
});

Deno.test("exec plugin: KUBERNETES_EXEC_INFO, args and env, and nothing else of ours", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // The plugin answers with a token that encodes what it saw, as JSON inside the token.
    const plugin = await script(
      dir,
      "plugin",
      `printf '%s' "$KUBERNETES_EXEC_INFO" > "${dir}/info.json"
env > "${dir}/env.txt"
printf '%s\\n' "$@" > "${dir}/args.txt"
echo '${credential(V1, { token: "tok" })}'`,
    );
    Deno.env.set("COCOON_TEST_SECRET", "must-not-leak");
    const source = new ExecCredentialSource(
      config(plugin, {
        args: ["get-token", "two words"],
        env: [{ name: "AWS_PROFILE", value: "dev" }],
        provideClusterInfo: true,
        clusterConfig: { audience: "a" },
      }),
      { server: "https://10.0.0.1:6443", caPem: "CA PEM" },
      { env: (n) => ({ PATH: "/usr/bin:/bin", HOME: "/home/op" } as Record<string, string>)[n] },
    );
    assert.deepEqual(await source.get(), { token: "tok" });
    const info = JSON.parse(await Deno.readTextFile(`${dir}/info.json`));
    assert.deepEqual(info, {
      kind: "ExecCredential",
      apiVersion: V1,
      spec: {
        interactive: false,
        cluster: {
          server: "https://10.0.0.1:6443",
          "certificate-authority-data": btoa("CA PEM"),
          config: { audience: "a" },
        },
      },
    });
    const env = Object.fromEntries(
      (await Deno.readTextFile(`${dir}/env.txt`)).trim().split("\n")
        .filter((l) => /^[A-Z_]+=/.test(l)).map((
          l,
        ) => [l.split("=")[0], l.slice(l.indexOf("=") + 1)]),
    );
    assert.equal(env.PATH, "/usr/bin:/bin");
    assert.equal(env.HOME, "/home/op");
    assert.equal(env.AWS_PROFILE, "dev");
    assert.equal(env.COCOON_TEST_SECRET, undefined);
    assert.equal(await Deno.readTextFile(`${dir}/args.txt`), "get-token\ntwo words\n");

    // Without provideClusterInfo the spec has no cluster.
    const plain = new ExecCredentialSource(config(plugin), { server: "https://s" }, {});
    await plain.get();
    assert.deepEqual(JSON.parse(await Deno.readTextFile(`${dir}/info.json`)).spec, {
      interactive: false,
    });
  } finally {
    Deno.env.delete("COCOON_TEST_SECRET");
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec plugin: cached until expirationTimestamp, one run for many callers", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // Each run appends a line to runs.txt and returns a token naming its run.
    const plugin = await script(
      dir,
      "plugin",
      `echo run >> "${dir}/runs.txt"
n=$(wc -l < "${dir}/runs.txt" | tr -d ' ')
sleep 0.2
echo '{"kind":"ExecCredential","apiVersion":"${V1}","status":{"token":"tok-'$n'","expirationTimestamp":"2030-01-01T00:00:00Z"}}'`,
    );
    let now = Date.parse("2029-12-31T23:00:00Z");
    const source = new ExecCredentialSource(config(plugin), { server: "https://s" }, {
      now: () => now,
    });
    const all = await Promise.all(Array.from({ length: 20 }, () => source.get()));
    assert.ok(all.every((c) => c === all[0]) && all[0].token === "tok-1");
    assert.equal((await source.get()).token, "tok-1");
    now = Date.parse("2030-01-01T00:00:00Z"); // at the expiry: still valid (client-go: After)
    assert.equal((await source.get()).token, "tok-1");
    now += 1;
    assert.equal((await source.get()).token, "tok-2");
    assert.equal(source.runs, 2);
    assert.equal(
      (await Deno.readTextFile(`${dir}/runs.txt`)).split("\n").filter(Boolean).length,
      2,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec plugin: a 401 reruns the plugin once and the request is sent again", async () => {
  const dir = await Deno.makeTempDir();
  const accepted = new Set<string>();
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const auth = req.headers.get("authorization") ?? "";
    seen.push(auth);
    return accepted.has(auth)
      ? Response.json({ kind: "Status", status: "Success" })
      : new Response("{}", { status: 401 });
  });
  try {
    const plugin = await script(
      dir,
      "plugin",
      `echo run >> "${dir}/runs.txt"
n=$(wc -l < "${dir}/runs.txt" | tr -d ' ')
echo '{"kind":"ExecCredential","apiVersion":"${V1}","status":{"token":"tok-'$n'"}}'`,
    );
    const kubeconfig = `${dir}/config`;
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: `http://127.0.0.1:${server.addr.port}` } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
        users: [{
          name: "u",
          user: { exec: { command: plugin, apiVersion: V1, interactiveMode: "Never" } },
        }],
      }),
    );
    accepted.add("Bearer tok-1");
    const transport = new Transport(
      await restConfigFor({ kind: "kubeconfig", origin: "KUBECONFIG", paths: [kubeconfig] }),
    );
    try {
      const get = async () => {
        const res = await transport.fetch({ method: "GET", path: "/version" });
        await res.body?.cancel();
        return res.status;
      };
      assert.deepEqual(await Promise.all([get(), get(), get()]), [200, 200, 200]);
      // The server stops taking tok-1: a burst of requests gets one new run, and each request
      // is answered with tok-2.
      accepted.clear();
      accepted.add("Bearer tok-2");
      assert.deepEqual(await Promise.all([get(), get(), get(), get()]), [200, 200, 200, 200]);
      assert.equal(await get(), 200);
      const runs = (await Deno.readTextFile(`${dir}/runs.txt`)).split("\n").filter(Boolean);
      assert.equal(runs.length, 2);
      // A server that refuses every token: one rerun per 401 to the current credential, then
      // the 401 is the answer (no loop).
      accepted.clear();
      assert.equal(await get(), 401);
      assert.equal(
        (await Deno.readTextFile(`${dir}/runs.txt`)).split("\n").filter(Boolean).length,
        3,
      );
      assert.ok(seen.includes("Bearer tok-3"));
    } finally {
      transport.close();
    }
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec plugin: timeout, output cap, exit codes and a missing binary's installHint", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const fails = async (cfg: ExecConfig, pattern: RegExp, opts = {}) => {
      const source = new ExecCredentialSource(cfg, { server: "https://s" }, opts);
      await assert.rejects(
        () => source.get(),
        (e: unknown) => e instanceof ExecPluginError && pattern.test(e.message),
      );
    };
    // `sleep` runs as the script's child and keeps its stdout open after the script is killed.
    const slow = await script(dir, "slow", "sleep 30\necho '{}'");
    await fails(config(slow), /of kubeconfig user dev: it did not finish within 0.3 s/, {
      timeoutMs: 300,
    });
    const chatty = await script(dir, "chatty", "head -c 5000 /dev/zero | tr '\\0' 'x'");
    await fails(config(chatty), /its output exceeds 1000 bytes/, { maxOutputBytes: 1000 });
    const failing = await script(dir, "failing", "exit 3");
    await fails(config(failing), /it failed with exit code 3/);
    await fails(
      config(`${dir}/missing-plugin`, { installHint: "Install it with:\n  apt install x" }),
      /executable .*missing-plugin not found; Install it with: apt install x$/,
    );
    await fails(
      config("cocoon-no-such-plugin", { installHint: "see the docs" }),
      /executable cocoon-no-such-plugin not found; see the docs$/,
      { env: (n: string) => n === "PATH" ? dir : undefined },
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec plugin: stderr goes to the log, the credential never does", async () => {
  const dir = await Deno.makeTempDir();
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
    const plugin = await script(
      dir,
      "plugin",
      `echo 'refreshing the login' >&2
echo '${
        credential(V1, {
          token: "super-secret-token",
          clientCertificateData: "SECRET-CERT",
          clientKeyData: "SECRET-KEY",
        })
      }'`,
    );
    const source = new ExecCredentialSource(config(plugin), { server: "https://s" }, {});
    const got = await source.get();
    source.unauthorized(got);
    await source.get();
    const logged = records.map((r) => JSON.stringify({ m: r.message, p: r.properties }))
      .join("\n");
    assert.match(logged, /refreshing the login/);
    assert.match(logged, /returned a credential/);
    assert.match(logged, /refused the exec plugin's credential \(401\)/);
    for (const secret of ["super-secret-token", "SECRET-CERT", "SECRET-KEY"]) {
      assert.ok(!logged.includes(secret), `${secret} was logged`);
    }
  } finally {
    await reset();
    await Deno.remove(dir, { recursive: true });
  }
});
