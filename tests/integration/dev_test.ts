/**
 * `deno task dev` as a user runs it: a process in a fresh HOME with no cluster configured (the
 * control-plane binaries come from ENVTEST_BIN_DIR, so nothing is built). It prints its kubeconfig;
 * the basic example applied with kubectl becomes Running on the simulator; SIGINT stops it with
 * exit code 0 and none of the processes it started survives (checked by pid and start time); when
 * a part dies on its own the rest is stopped and the exit code is 1. With a cluster configured but
 * unusable it prints one line and exits 2.
 */
import assert from "node:assert/strict";
import { envtestBinDir } from "../../scripts/envtest.ts";
import { type ProcessHandle, runProcess } from "../harness/process.ts";
import { startControlPlane } from "../harness/control_plane.ts";
import { registryAvailable, startRegistry } from "../harness/registry.ts";
import { freePort, waitUntil } from "../harness/wait.ts";

const repoRoot = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
const READY_TIMEOUT_MS = 180_000;
const EXIT_TIMEOUT_MS = 60_000;

/** A process seen under the dev task, identified by pid and start time (pids are reused). */
interface Seen {
  pid: number;
  start: string;
  comm: string;
  cmdline: string;
}

function statFields(pid: number): string[] | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

function seen(pid: number): Seen | undefined {
  const fields = statFields(pid);
  if (!fields) return undefined;
  try {
    return {
      pid,
      // Field 22 of /proc/<pid>/stat; 20 after the name and state are cut off.
      start: fields[19],
      comm: Deno.readTextFileSync(`/proc/${pid}/comm`).trim(),
      cmdline: Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " "),
    };
  } catch {
    return undefined;
  }
}

/** Every live descendant of `pid`. */
function descendants(pid: number): Seen[] {
  const out: Seen[] = [];
  const visit = (p: number) => {
    let children: number[] = [];
    try {
      for (const task of Deno.readDirSync(`/proc/${p}/task`)) {
        const text = Deno.readTextFileSync(`/proc/${p}/task/${task.name}/children`);
        children = children.concat(text.split(" ").filter((s) => s).map(Number));
      }
    } catch {
      return;
    }
    for (const c of children) {
      const s = seen(c);
      if (s) out.push(s);
      visit(c);
    }
  };
  visit(pid);
  return out;
}

/** The processes of `before` that still run (same pid and start time, not a zombie). */
function survivors(before: Seen[]): Seen[] {
  return before.filter((p) => {
    const fields = statFields(p.pid);
    return fields !== undefined && fields[0] !== "Z" && fields[19] === p.start;
  });
}

/**
 * After a failed assertion: kills what is left, except the watchdog shells, which then remove
 * the servers' folders themselves once the dev task is gone.
 */
function killSurvivors(before: Seen[]): void {
  for (const p of survivors(before)) {
    if (p.cmdline.includes("WATCHDOG_PIDS")) continue;
    try {
      Deno.kill(p.pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
}

async function denoDir(): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).denoDir;
}

/** Environment of a user with a fresh HOME and no cluster configured. */
async function freshUser(home: string, extra: Record<string, string> = {}) {
  return {
    HOME: home,
    DENO_DIR: await denoDir(),
    KUBECONFIG: "",
    KUBERNETES_SERVICE_HOST: "",
    NO_COLOR: "1",
    ...extra,
  };
}

function startDev(env: Record<string, string>, args: string[] = []): Promise<ProcessHandle> {
  return runProcess([Deno.execPath(), "task", "--quiet", "dev", ...args], { env, cwd: repoRoot });
}

async function exitWithin(proc: ProcessHandle, ms: number): Promise<Deno.CommandStatus> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`dev did not exit within ${ms} ms\n${proc.output.slice(-3000)}`)),
      ms,
    );
  });
  try {
    return await Promise.race([proc.status, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function kubectl(kubeconfig: string, args: string[]): Promise<string> {
  const bin = await Deno.stat("/usr/bin/kubectl").then(() => "/usr/bin/kubectl").catch(
    async () => `${await envtestBinDir()}/kubectl`,
  );
  const out = await new Deno.Command(bin, {
    args: [`--kubeconfig=${kubeconfig}`, ...args],
    env: { KUBECACHEDIR: `${kubeconfig}.cache` },
    stdin: "null",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  if (!out.success) throw new Error(`kubectl ${args.join(" ")}: ${decode(out.stderr)}`);
  return decode(out.stdout);
}

/** The parts the stack must have started, found among the task's descendants. */
function stackParts(all: Seen[]): Record<string, Seen | undefined> {
  return {
    etcd: all.find((p) => p.comm === "etcd"),
    "kube-apiserver": all.find((p) => p.comm === "kube-apiserver"),
    "docker-registry": all.find((p) => p.comm === "docker-registry"),
    sim: all.find((p) => p.cmdline.includes("sim/main.ts")),
    operator: all.find((p) => / \S*\/main\.ts( |$)/.test(p.cmdline) && !p.cmdline.includes("sim/")),
  };
}

/** Starts the local stack and waits for its kubeconfig line and every part. */
async function startStack(home: string) {
  const state = `${home}/state`;
  const dev = await startDev(
    await freshUser(home, {
      ENVTEST_BIN_DIR: await envtestBinDir(),
      METRICS_ADDR: `127.0.0.1:${freePort()}`,
      PROBE_ADDR: `127.0.0.1:${freePort()}`,
    }),
    ["--dir", state],
  );
  const match = await dev.waitForOutput(/^kubeconfig: (\S+)$/m, READY_TIMEOUT_MS);
  assert.equal(match[1], `${state}/kubeconfig`);
  const all = descendants(dev.pid);
  const parts = stackParts(all);
  for (const [name, proc] of Object.entries(parts)) {
    assert.ok(
      proc,
      `no ${name} among the task's processes:\n${all.map((p) => p.cmdline).join("\n")}`,
    );
  }
  return { dev, state, kubeconfig: match[1], all, parts };
}

Deno.test({
  name: "deno task dev: local stack, a CocoonSet runs, SIGINT stops everything",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const home = await Deno.makeTempDir({ prefix: "dev-test-home-" });
    let dev: ProcessHandle | undefined;
    let all: Seen[] = [];
    try {
      const stack = await startStack(home);
      dev = stack.dev;
      all = stack.all;
      assert.match(dev.output, /export KUBECONFIG=\S+\/state\/kubeconfig/);
      assert.match(dev.output, /kubectl apply -f examples\/cocoonset-basic\.yaml/);

      const second = await runToEnd(await freshUser(home), ["--dir", stack.state]);
      assert.equal(second.code, 2, "a second dev task on the same folder is refused");
      assert.deepEqual(second.lines, [
        `dev: another \`deno task dev\` (pid ${
          stack.all.find((p) => p.cmdline.includes("scripts/dev.ts"))?.pid
        }) uses ${stack.state}; stop it first or pass --dir`,
      ]);

      await kubectl(stack.kubeconfig, ["apply", "-f", `${repoRoot}/examples/cocoonset-basic.yaml`]);
      const status = await waitUntil(async () => {
        const json = JSON.parse(
          await kubectl(stack.kubeconfig, [
            "get",
            "cocoonsets.cocoonset.cocoonstack.io",
            "basic",
            "-o",
            "json",
          ]),
        );
        return json.status?.phase === "Running" ? json.status : undefined;
      }, { timeoutMs: 90_000, intervalMs: 500, what: "CocoonSet basic Running" });
      assert.equal(status.readyAgents, 3, "main and two sub-agents");
      assert.equal(status.readyToolboxes, 1);
      assert.match(dev.output, /^operator \| .*created main agent default\/basic-0$/m);
      assert.match(dev.output, /^sim {6}\| .*default\/basic-0 is ready on cocoon-sim-\d$/m);

      // Temp folders the stack made, read from the servers' command lines.
      const etcdData = stack.parts.etcd!.cmdline.match(/--data-dir=(\S+)\/etcd/)?.[1];
      const registryDir = stack.parts["docker-registry"]!.cmdline.match(/serve (\S+)\/config\.yml/)
        ?.[1];
      assert.ok(etcdData && registryDir);

      dev.kill("SIGINT");
      const exit = await exitWithin(dev, EXIT_TIMEOUT_MS);
      assert.equal(exit.code, 0, dev.output.slice(-3000));
      assert.match(dev.output, /^dev: received SIGINT; stopping/m);
      assert.match(dev.output, /^dev: stopped; temporary files removed$/m);
      const order = ["manager stopped cleanly", "VM simulator stopped"].map((s) =>
        dev!.output.indexOf(s)
      );
      assert.ok(order[0] >= 0 && order[0] < order[1], "the operator stops before the simulator");
      assert.deepEqual(survivors(all).map((p) => p.cmdline), []);
      for (const dir of [etcdData, registryDir, `${stack.state}/pids`]) {
        await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, `${dir} was left behind`);
      }
      await assert.rejects(Deno.stat(stack.kubeconfig), Deno.errors.NotFound);
    } finally {
      await dev?.stop(5_000);
      killSurvivors(all);
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "deno task dev: a part that dies takes the stack down, exit 1 naming it, no orphans",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const home = await Deno.makeTempDir({ prefix: "dev-test-home-" });
    let dev: ProcessHandle | undefined;
    let all: Seen[] = [];
    try {
      const stack = await startStack(home);
      dev = stack.dev;
      all = stack.all;
      Deno.kill(stack.parts.sim!.pid, "SIGKILL");
      const exit = await exitWithin(dev, EXIT_TIMEOUT_MS);
      assert.equal(exit.code, 1, dev.output.slice(-3000));
      assert.match(
        dev.output,
        /^dev: the simulator was killed by SIGKILL; stopping the rest of the stack$/m,
      );
      assert.match(
        dev.output,
        /^operator \| .*manager stopped cleanly$/m,
        "the rest stops in order",
      );
      assert.deepEqual(survivors(all).map((p) => p.cmdline), []);
    } finally {
      await dev?.stop(5_000);
      killSurvivors(all);
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "deno task dev: an operator that fails at start-up ends the start at once, exit 1",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const home = await Deno.makeTempDir({ prefix: "dev-test-home-" });
    // The probe port is taken, so the operator cannot start its probe server and exits.
    const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let dev: ProcessHandle | undefined;
    let all: Seen[] = [];
    try {
      dev = await startDev(
        await freshUser(home, {
          ENVTEST_BIN_DIR: await envtestBinDir(),
          METRICS_ADDR: `127.0.0.1:${freePort()}`,
          PROBE_ADDR: `127.0.0.1:${taken.addr.port}`,
        }),
        ["--dir", `${home}/state`],
      );
      await dev.waitForOutput(/^dev: starting the operator$/m, READY_TIMEOUT_MS);
      all = descendants(dev.pid);
      // Readiness is polled for 90 s; the operator's exit must end the wait well before that.
      const exit = await exitWithin(dev, EXIT_TIMEOUT_MS);
      assert.equal(exit.code, 1, dev.output.slice(-3000));
      assert.match(
        dev.output,
        /^dev: the local stack did not start: the operator exited with code 1$/m,
      );
      assert.doesNotMatch(dev.output, /^kubeconfig: /m);
      assert.deepEqual(survivors(all).map((p) => p.cmdline), []);
    } finally {
      taken.close();
      await dev?.stop(5_000);
      killSurvivors(all);
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "deno task dev: with KUBECONFIG set, only the operator runs, against that cluster",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const home = await Deno.makeTempDir({ prefix: "dev-test-home-" });
    const cp = await startControlPlane();
    const registry = await startRegistry({ auth: "none" });
    let dev: ProcessHandle | undefined;
    try {
      dev = await startDev(
        await freshUser(home, {
          KUBECONFIG: cp.kubeconfigPath,
          OCI_REGISTRY: `${registry.host}/cocoon`,
          METRICS_ADDR: `127.0.0.1:${freePort()}`,
          PROBE_ADDR: `127.0.0.1:${freePort()}`,
        }),
      );
      await dev.waitForOutput(
        new RegExp(`^dev: running the operator against KUBECONFIG=${cp.kubeconfigPath}, `, "m"),
        READY_TIMEOUT_MS,
      );
      await dev.waitForOutput(/^operator \| .*starting manager /m, READY_TIMEOUT_MS);
      const all = descendants(dev.pid);
      assert.ok(stackParts(all).operator, "the operator runs");
      for (const part of ["etcd", "kube-apiserver", "docker-registry", "sim"]) {
        assert.equal(stackParts(all)[part], undefined, `no ${part} of its own`);
      }
      // Leader election is off by default here: the operator reconciles without a Lease namespace.
      await kubectl(cp.kubeconfigPath, [
        "apply",
        "-f",
        `${repoRoot}/examples/cocoonset-basic.yaml`,
      ]);
      await waitUntil(
        () => kubectl(cp.kubeconfigPath, ["get", "pod", "basic-0", "-o", "name"]).then(Boolean),
        { timeoutMs: 60_000, intervalMs: 500, what: "the operator to create basic-0" },
      );
      dev.kill("SIGINT");
      const exit = await exitWithin(dev, EXIT_TIMEOUT_MS);
      assert.equal(exit.code, 0, dev.output.slice(-3000));
      assert.match(dev.output, /^operator \| .*manager stopped cleanly$/m);
      assert.deepEqual(survivors(all).map((p) => p.cmdline), []);
    } finally {
      await dev?.stop(5_000);
      await registry.stop();
      await cp.stop();
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  },
});

/** Runs `deno task dev` to its end; returns its exit code and non-empty output lines. */
async function runToEnd(
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ code: number; lines: string[] }> {
  const dev = await startDev(env, args);
  const status = await exitWithin(dev, EXIT_TIMEOUT_MS);
  return { code: status.code, lines: dev.output.split("\n").filter((l) => l.trim() !== "") };
}

Deno.test({
  name: "deno task dev: a configured cluster that cannot be used gives one line and exit 2",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const home = await Deno.makeTempDir({ prefix: "dev-test-home-" });
    try {
      const port = freePort();
      const kubeconfig = `${home}/unreachable.kubeconfig`;
      await Deno.writeTextFile(
        kubeconfig,
        JSON.stringify({
          apiVersion: "v1",
          kind: "Config",
          clusters: [{ name: "c", cluster: { server: `https://127.0.0.1:${port}` } }],
          users: [{ name: "u", user: { token: "t" } }],
          contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
          "current-context": "c",
        }),
      );

      await t.step("unreachable API server", async () => {
        const { code, lines } = await runToEnd(
          await freshUser(home, { KUBECONFIG: kubeconfig, OCI_REGISTRY: "127.0.0.1:5000/x" }),
        );
        assert.equal(code, 2);
        assert.equal(lines.length, 1, lines.join("\n"));
        assert.match(
          lines[0],
          new RegExp(
            `^dev: cannot reach the Kubernetes API server https://127\\.0\\.0\\.1:${port} ` +
              `\\(from KUBECONFIG=${kubeconfig}\\): .*; pass --local for a local stack instead$`,
          ),
        );
      });

      await t.step("OCI_REGISTRY missing", async () => {
        const { code, lines } = await runToEnd(await freshUser(home, { KUBECONFIG: kubeconfig }));
        assert.equal(code, 2);
        assert.equal(lines.length, 1, lines.join("\n"));
        assert.match(lines[0], /^dev: OCI_REGISTRY must be set to run the operator against /);
      });

      await t.step("KUBECONFIG names no file", async () => {
        const { code, lines } = await runToEnd(
          await freshUser(home, { KUBECONFIG: `${home}/missing`, OCI_REGISTRY: "r/x" }),
        );
        assert.equal(code, 2);
        assert.equal(lines.length, 1, lines.join("\n"));
        assert.match(lines[0], /^dev: KUBECONFIG=\S+\/missing names no readable file; /);
      });
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});
