import assert from "node:assert/strict";
import { createCertificateAuthority } from "../kube/x509.ts";
import { launchPlan } from "./start.ts";
import { v8FlagsArg } from "./runtime_flags.ts";
import { LOCAL_ONLY_ENV, OPERATOR_ENV, PROXY_VARIABLES } from "../operator_env.ts";

const repoRoot = new URL("../", import.meta.url).pathname;

Deno.test("start: the operator gets exactly the local set for this kubeconfig", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/ca.crt`, "CA");
    await Deno.writeTextFile(
      `${dir}/config`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{
          name: "c",
          cluster: { server: "https://127.0.0.1:6443", "certificate-authority": "ca.crt" },
        }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const plan = launchPlan(["--leader-elect=false"], {
      KUBECONFIG: "config",
      OCI_REGISTRY: "registry.example.com:5000/vms",
      PROBE_ADDR: "127.0.0.1:18081",
      METRICS_ADDR: "0",
    }, dir);
    assert.ok(plan.ok);
    assert.equal(plan.childEnv.KUBECONFIG, `${dir}/config`);
    const [run, noPrompt, net, read, env, main, ...rest] = plan.args;
    assert.deepEqual([run, noPrompt], ["run", "--no-prompt"]);
    assert.equal(net, "--allow-net=127.0.0.1:18081,127.0.0.1:6443,registry.example.com:5000");
    assert.equal(read, `--allow-read=${dir}/config,${dir}/ca.crt`);
    assert.match(env, /^--allow-env=OCI_REGISTRY,.*,HOME,XDG_RUNTIME_DIR,REGISTRY_AUTH_FILE$/);
    assert.equal(main, `${repoRoot}main.ts`);
    assert.deepEqual(rest, ["--leader-elect=false"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: a relative --kubeconfig is made absolute and its files granted", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/flagged`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:7443" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const plan = launchPlan(["--leader-elect=false", "--kubeconfig", "flagged"], {
      KUBECONFIG: "/nonexistent/config",
      OCI_REGISTRY: "registry.example.com:5000/vms",
      PROBE_ADDR: "0",
      METRICS_ADDR: "0",
    }, dir);
    assert.ok(plan.ok, plan.ok ? "" : plan.message);
    assert.ok(plan.args.includes(`--allow-read=${dir}/flagged`), plan.args.join(" "));
    assert.ok(plan.args.some((a) => a.startsWith("--allow-net=") && a.includes("127.0.0.1:7443")));
    assert.equal(plan.args.at(-1), `--kubeconfig=${dir}/flagged`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: bad input and no cluster are reasons, not plans", () => {
  const noCluster = launchPlan([], { OCI_REGISTRY: "r.example.com/x", HOME: "/nonexistent" }, "/");
  assert.ok(!noCluster.ok);
  assert.match(noCluster.message, /^no Kubernetes cluster configured: tried KUBECONFIG/);
  const bad = launchPlan(["--bogus"], { OCI_REGISTRY: "r.example.com/x" }, "/");
  assert.ok(!bad.ok);
  assert.match(bad.message, /bogus/);
  const help = launchPlan(["--help"], {}, "/");
  assert.ok(help.ok);
  assert.ok(!help.args.some((a) => a.startsWith("--allow-")));
});

Deno.test("deno task start with no cluster: one line naming what it tried, exit 2", async () => {
  // The cache folder follows HOME by default; keep using the one this test run uses.
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const denoDir = String(JSON.parse(new TextDecoder().decode(info.stdout)).denoDir);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "start"],
    cwd: repoRoot,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      DENO_DIR: denoDir,
      HOME: "/nonexistent",
      OCI_REGISTRY: "r.example.com/x",
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr).trim();
  assert.equal(out.code, 2, stderr);
  assert.equal(
    stderr,
    "cocoon-operator: no Kubernetes cluster configured: tried KUBECONFIG (unset), in-cluster " +
      "(KUBERNETES_SERVICE_HOST unset), ~/.kube/config (/nonexistent/.kube/config missing); " +
      "for a local sandbox cluster run `deno task dev`",
  );
});

/** `deno task start` against an API server that does not answer; its exit code and output. */
async function startUnreachable(
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const denoDir = String(JSON.parse(new TextDecoder().decode(info.stdout)).denoDir);
  const dir = await Deno.makeTempDir();
  try {
    const kubeconfig = `${dir}/kubeconfig`;
    const ca = btoa((await createCertificateAuthority("unreachable-test-ca")).certPem);
    await Deno.writeTextFile(
      kubeconfig,
      [
        "apiVersion: v1",
        "kind: Config",
        `clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: ${ca}}}]`,
        "users: [{name: u, user: {token: t}}]",
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
        "",
      ].join("\n"),
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "--quiet", "start"],
      cwd: repoRoot,
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "",
        DENO_DIR: denoDir,
        HOME: dir,
        KUBECONFIG: kubeconfig,
        OCI_REGISTRY: "r.example.com/x",
        LEADER_ELECT: "false",
        ...extraEnv,
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = (b: Uint8Array) => new TextDecoder().decode(b);
    return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr).trim() };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("deno task start with an API server that does not answer: one line on the terminal, exit 2", async () => {
  const { code, stdout, stderr } = await startUnreachable();
  assert.equal(code, 2, stderr);
  assert.equal(stdout, "", "nothing on stdout");
  assert.equal(stderr.split("\n").length, 1, stderr);
  assert.match(stderr, /^cocoon-operator: .*127\.0\.0\.1:1.*deno task dev/);
});

Deno.test("deno task start with proxy variables: one line names those not passed on", async () => {
  const { code, stderr } = await startUnreachable({
    HTTPS_PROXY: "http://127.0.0.1:9",
    no_proxy: "example.com",
    http_proxy: "127.0.0.1:9",
    ALL_PROXY: "",
    // The deno CLI running the task would check for a newer release through the proxy.
    DENO_NO_UPDATE_CHECK: "1",
  });
  assert.equal(code, 2, stderr);
  const lines = stderr.split("\n");
  assert.equal(lines.length, 2, stderr);
  assert.equal(
    lines[0],
    "start: HTTPS_PROXY, http_proxy not passed to the operator (its permission set names no " +
      "proxy); COCOON_START_KEEP_PROXY=1 passes them on and grants the proxy",
  );
  // The operator did not go through the proxy: it names the API server it could not reach.
  assert.match(lines[1], /^cocoon-operator: .*127\.0\.0\.1:1.*deno task dev/);
});

Deno.test("start: the launcher's module graph leaves out the metrics stack and the logger", async () => {
  // The launcher runs before every operator start; the metrics registry and LogTape would double
  // its cost.
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("./start.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string }[];
  };
  const npm = graph.modules.map((m) => m.specifier).filter((s) => s.startsWith("npm:"));
  assert.deepEqual(npm.map((s) => s.replace(/^npm:\/?/, "").replace(/@[^@]*$/, "")), ["js-yaml"]);
});

Deno.test("start: the task runs one launcher: reads, variables and deno, no net or write, the operator's V8 flags", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`)).tasks;
  const words = String(tasks.start).split(" ");
  assert.deepEqual(words, [
    "deno",
    "run",
    "--no-prompt",
    "--allow-read",
    "--allow-env",
    "--allow-run=deno",
    // V8 rejects a module's code cache written under other flags: the launcher and the operator
    // share config.ts, permissions.ts, js-yaml and more, so they run with the same flags.
    v8FlagsArg(),
    "scripts/start.ts",
  ]);
  assert.ok(!words.some((w) => /^--allow-(write|net|sys|ffi|all|import)|^-A$/.test(w)));
});

Deno.test("start: the operator's environment is cleared to its own variables, proxies dropped", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/config`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const env = {
      KUBECONFIG: `${dir}/config`,
      OCI_REGISTRY: "registry.example.com/vms",
      METRICS_ADDR: "0",
      PROBE_ADDR: "0",
      HTTP_PROXY: "127.0.0.1:18555",
      https_proxy: "http://proxy.corp:3128",
      AWS_SECRET_ACCESS_KEY: "not for the operator",
      DENO_DIR: "/cache/deno",
      DENO_V8_FLAGS: "--trace-gc",
    };
    const plan = launchPlan(["--leader-elect=false"], env, dir);
    assert.ok(plan.ok, plan.ok ? "" : plan.message);
    assert.deepEqual(plan.childEnv, {
      OCI_REGISTRY: "registry.example.com/vms",
      METRICS_ADDR: "0",
      PROBE_ADDR: "0",
      KUBECONFIG: `${dir}/config`,
      DENO_DIR: "/cache/deno",
      // The launcher runs with it too: the same V8 flags share one code cache.
      DENO_V8_FLAGS: "--trace-gc",
      // The deno CLI's own release check would go out past --allow-net.
      DENO_NO_UPDATE_CHECK: "1",
    });
    const net = plan.args.find((a) => a.startsWith("--allow-net="))!;
    assert.ok(!net.includes("18555") && !net.includes("proxy.corp"), net);
    // Kept on purpose: passed on, and the proxy is granted by name.
    const kept = launchPlan(
      ["--leader-elect=false"],
      { ...env, COCOON_START_KEEP_PROXY: "1" },
      dir,
    );
    assert.ok(kept.ok);
    assert.equal(kept.childEnv.HTTP_PROXY, "127.0.0.1:18555");
    assert.ok(kept.args.some((a) => a.startsWith("--allow-net=") && a.includes("127.0.0.1:18555")));
    assert.ok(!("AWS_SECRET_ACCESS_KEY" in kept.childEnv));
    assert.deepEqual(plan.droppedProxies, ["HTTP_PROXY", "https_proxy"]);
    assert.deepEqual(kept.droppedProxies, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A kubeconfig whose user runs `command` as its exec plugin. */
function execKubeconfig(command: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    "current-context": "c",
    clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
    users: [{
      name: "u",
      user: {
        exec: {
          command,
          apiVersion: "client.authentication.k8s.io/v1",
          interactiveMode: "Never",
          ...extra,
        },
      },
    }],
    contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
  });
}

Deno.test("start: an exec plugin on PATH is granted as its one absolute path, with PATH", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/bin`);
    await Deno.writeTextFile(`${dir}/bin/my-auth-plugin`, "#!/bin/sh\n", { mode: 0o755 });
    await Deno.writeTextFile(`${dir}/config`, execKubeconfig("my-auth-plugin"));
    const plan = launchPlan(["--leader-elect=false"], {
      KUBECONFIG: `${dir}/config`,
      OCI_REGISTRY: "registry.example.com:5000/vms",
      PATH: `relative:${dir}/empty:${dir}/bin:/usr/bin`,
    }, dir);
    assert.ok(plan.ok, plan.ok ? "" : plan.message);
    const run = plan.args.filter((a) => a.startsWith("--allow-run"));
    assert.deepEqual(run, [`--allow-run=${dir}/bin/my-auth-plugin`]);
    const env = plan.args.find((a) => a.startsWith("--allow-env="))!.split("=")[1].split(",");
    assert.ok(env.includes("PATH") && env.includes("HOME"), env.join(","));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: a loopback metrics listener is plain http unless asked; others stay secure", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/config`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const env = { KUBECONFIG: `${dir}/config`, OCI_REGISTRY: "r.example.com/x", PROBE_ADDR: "0" };
    const args = (extra: Record<string, string>, flags: string[] = []) => {
      const plan = launchPlan(["--leader-elect=false", ...flags], { ...env, ...extra }, dir);
      assert.ok(plan.ok, plan.ok ? "" : plan.message);
      return plan.args.slice(plan.args.indexOf(plan.args.find((a) => a.endsWith("main.ts"))!) + 1);
    };
    assert.deepEqual(args({ METRICS_ADDR: "127.0.0.1:9090" }), [
      "--leader-elect=false",
      "--metrics-secure=false",
    ]);
    assert.deepEqual(args({ METRICS_ADDR: ":9090" }), ["--leader-elect=false"]);
    assert.deepEqual(args({ METRICS_ADDR: "127.0.0.1:9090", METRICS_SECURE: "true" }), [
      "--leader-elect=false",
    ]);
    assert.deepEqual(args({ METRICS_ADDR: "127.0.0.1:9090" }, ["--metrics-secure"]), [
      "--leader-elect=false",
      "--metrics-secure",
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: a missing plugin names its installHint; shells and symlinks to them are refused", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const plan = (command: string, extra = {}) => {
      Deno.writeTextFileSync(`${dir}/config`, execKubeconfig(command, extra));
      return launchPlan(["--leader-elect=false"], {
        KUBECONFIG: `${dir}/config`,
        OCI_REGISTRY: "registry.example.com:5000/vms",
        PATH: `${dir}:/usr/bin:/bin`,
      }, dir);
    };
    const missing = plan("no-such-auth-plugin", { installHint: "Install it:\n  brew install x" });
    assert.ok(!missing.ok);
    assert.equal(
      missing.message,
      "exec credential plugin no-such-auth-plugin of kubeconfig user u not found on PATH; " +
        "Install it: brew install x",
    );
    const shell = plan("/bin/sh", { args: ["-c", "echo"] });
    assert.ok(!shell.ok);
    assert.match(shell.message, /exec plugin \/bin\/sh refused: sh is a shell/);
    await Deno.symlink("/bin/sh", `${dir}/innocent-plugin`);
    const linked = plan("innocent-plugin");
    assert.ok(!linked.ok);
    assert.match(linked.message, /innocent-plugin of kubeconfig user u refused: .* is a shell/);
    const operator = plan("deno", { args: ["eval", "1"] });
    assert.ok(!operator.ok);
    assert.match(operator.message, /deno is a shell, interpreter or launcher/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task start with a plugin that fails: its stderr in the log, one line naming the exit, exit 2", async () => {
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const denoDir = String(JSON.parse(new TextDecoder().decode(info.stdout)).denoDir);
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/bin`);
    await Deno.writeTextFile(
      `${dir}/bin/failing-auth-plugin`,
      "#!/bin/sh\necho 'not logged in: run the login command' >&2\nexit 7\n",
      { mode: 0o755 },
    );
    await Deno.writeTextFile(`${dir}/config`, execKubeconfig("failing-auth-plugin"));
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["task", "--quiet", "start"],
      cwd: repoRoot,
      clearEnv: true,
      env: {
        PATH: `${dir}/bin:${Deno.env.get("PATH") ?? ""}`,
        DENO_DIR: denoDir,
        HOME: dir,
        KUBECONFIG: `${dir}/config`,
        OCI_REGISTRY: "r.example.com/x",
        LEADER_ELECT: "false",
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr).trim();
    assert.equal(out.code, 2, stderr);
    const lines = stderr.split("\n");
    assert.equal(
      lines.at(-1),
      `cocoon-operator: cannot use the credentials from KUBECONFIG=${dir}/config: exec ` +
        `credential plugin failing-auth-plugin of kubeconfig user u: it failed with exit code 7`,
    );
    assert.match(stderr, /not logged in: run the login command/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: the operator's cleared environment keeps PATH only for an exec plugin", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/bin`);
    await Deno.writeTextFile(`${dir}/bin/my-auth-plugin`, "#!/bin/sh\n", { mode: 0o755 });
    const env = {
      OCI_REGISTRY: "registry.example.com:5000/vms",
      PATH: `${dir}/bin:/usr/bin`,
      HOME: `${dir}/home`,
    };
    await Deno.writeTextFile(`${dir}/exec`, execKubeconfig("my-auth-plugin"));
    const withPlugin = launchPlan(["--leader-elect=false"], {
      ...env,
      KUBECONFIG: `${dir}/exec`,
    }, dir);
    assert.ok(withPlugin.ok, withPlugin.ok ? "" : withPlugin.message);
    assert.equal(withPlugin.childEnv.PATH, env.PATH);
    assert.equal(withPlugin.childEnv.HOME, env.HOME);
    await Deno.writeTextFile(
      `${dir}/token`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const withToken = launchPlan(["--leader-elect=false"], {
      ...env,
      KUBECONFIG: `${dir}/token`,
    }, dir);
    assert.ok(withToken.ok, withToken.ok ? "" : withToken.message);
    assert.ok(!("PATH" in withToken.childEnv), Object.keys(withToken.childEnv).join(","));
    assert.ok(!withToken.args.some((a) => a.startsWith("--allow-run")));
    const granted = withToken.args.find((a) => a.startsWith("--allow-env="))!.split("=")[1];
    assert.ok(!granted.split(",").includes("PATH"), granted);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start: each operator variable that is set reaches the operator and its grant; proxies only when kept", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/config`,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    // Valid values where the configuration checks them; any text elsewhere.
    const valid: Record<string, string> = {
      KUBECONFIG: `${dir}/config`,
      OCI_REGISTRY: "registry.example.com/vms",
      METRICS_ADDR: "0",
      PROBE_ADDR: "0",
      LEADER_ELECT: "false",
      COCOONSET_CONCURRENCY: "2",
      HIBERNATION_CONCURRENCY: "2",
      MAX_REPLICAS_PER_SET: "10",
      MAX_TOOLBOXES_PER_SET: "10",
      INFORMER_STALL_SECONDS: "60",
      RBAC_RECHECK_SECONDS: "60",
      ENABLE_HTTP2: "false",
      SHARDS: "off",
      OPERATOR_LOG_LEVEL: "info",
      OPERATOR_LOG_FORMAT: "text",
      OPERATOR_ALLOW_EXTRA_PERMISSIONS: "false",
      OPERATOR_ALLOW_PLAIN_HTTP: "registry.example.com",
      OPERATOR_ALLOW_NET: "auth.example.com",
      METRICS_SECURE: "false",
      HOME: `${dir}/home`,
    };
    const env: Record<string, string> = {};
    for (const name of [...OPERATOR_ENV, ...LOCAL_ONLY_ENV]) {
      env[name] = valid[name] ?? (PROXY_VARIABLES.includes(name) ? "proxy.example.com:3128" : "x");
    }
    for (const keep of [false, true]) {
      const plan = launchPlan(
        [],
        { ...env, ...(keep ? { COCOON_START_KEEP_PROXY: "1" } : {}) },
        dir,
      );
      assert.ok(plan.ok, plan.ok ? "" : plan.message);
      const granted = plan.args.find((a) => a.startsWith("--allow-env="))!.split("=")[1].split(",");
      for (const name of Object.keys(env)) {
        const passed = keep || !PROXY_VARIABLES.includes(name);
        assert.equal(plan.childEnv[name], passed ? env[name] : undefined, name);
        if (passed) assert.ok(granted.includes(name), `${name} granted`);
      }
      assert.deepEqual(plan.droppedProxies, keep ? [] : PROXY_VARIABLES);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
