/**
 * `deno task dev`: the operator on this machine, with a cluster to talk to.
 *
 * - A cluster is configured (KUBECONFIG, the in-cluster service account or ~/.kube/config, the
 *   operator's own order): the operator runs against it through scripts/start.ts (the permission
 *   sandbox applies), with leader election off and text logs unless set otherwise. OCI_REGISTRY
 *   is required and the API server must answer; otherwise one line and exit 2.
 * - No cluster (or `--local`): a local stack of real parts — etcd and kube-apiserver from
 *   tests/harness/control_plane.ts (the project's CRDs installed; binaries built on first use
 *   like `deno task envtest`), Debian's docker-registry, the VM simulator with three virtual
 *   nodes, and the operator through scripts/start.ts. The admin kubeconfig is written to
 *   `<dir>/kubeconfig` (default `.dev/kubeconfig`) and the commands to try are printed.
 *
 * The children's output is streamed with a name prefix. SIGINT, SIGTERM or SIGHUP stop the
 * operator, the simulator, the registry, kube-apiserver and etcd in that order and exit 0. When a
 * part dies by itself, the rest is stopped the same way and the exit code is 1, after a line naming
 * the part. Every child runs in a session of its own (a terminal's Ctrl-C reaches only this
 * process, which then stops them in order), and watchdogs kill them should this process be killed
 * outright. Setup problems (missing registry binary, missing Go, bad configuration, unreachable
 * cluster) print one line and exit 2; nothing is ever installed.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { isAbsolute, relative, resolve } from "node:path";
import { type Config, parseConfig } from "../config.ts";
import { describeSource } from "../kube/kubeconfig.ts";
import { errorMessage } from "../kube/errors.ts";
import { parseBindAddress } from "../kube/bind_address.ts";
import { connect, PreflightError } from "../preflight.ts";
import { type ControlPlane, startControlPlane } from "../tests/harness/control_plane.ts";
import { REGISTRY_BIN, registryAvailable, startRegistry } from "../tests/harness/registry.ts";
import { spawnWatchdog, type Watchdog } from "../tests/harness/watchdog.ts";
import { freePort, waitUntil } from "../tests/harness/wait.ts";
import { envtestBinDir, existingEnvtestBinDir } from "./envtest.ts";
import { describeExit, type DevChild, spawnDevChild } from "./dev_child.ts";
import { chooseDevMode } from "./dev_mode.ts";

const REPO_ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

/** The simulator's shape in the local stack: nodes of one pool, seats per node, latencies. */
export const SIM_NODES = { count: 3, prefix: "cocoon-sim-", pool: "default", seats: 4 } as const;
const SIM_LATENCY_FLAGS = [
  "--boot-ms=1500",
  "--wake-ms=1500",
  "--hibernate-ms=2000",
  "--delete-ms=500",
];

/** Path inside the repository of the registry prefix the local stack's snapshots go under. */
const REGISTRY_PREFIX = "cocoon";

/** How long each part may take to stop before it is killed. */
const OPERATOR_GRACE_MS = 20_000;
const SIM_GRACE_MS = 10_000;
/** How long the simulator and the operator may take to become ready. */
const READY_TIMEOUT_MS = 90_000;

/** Exit code for a set-up problem the user must fix (same as the operator's). */
const EXIT_SETUP = 2;

/** The dev task's own command line. */
export interface DevFlags {
  /** Folder for the kubeconfig and the task's state (absolute). */
  dir: string;
  /** Start the local stack even when a cluster is configured. */
  local: boolean;
  help: boolean;
}

/** A bad command line; the message is one line. */
export class DevUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DevUsageError";
  }
}

/** The --help text. */
function devUsage(): string {
  return `usage: deno task dev [--local] [--dir PATH]

Runs the operator against the configured cluster (KUBECONFIG, in-cluster, ~/.kube/config; needs
OCI_REGISTRY), or, with no cluster configured or with --local, starts a local stack: etcd,
kube-apiserver, docker-registry, the VM simulator (${SIM_NODES.count} nodes) and the operator.

  --local      start the local stack even when a cluster is configured
  --dir PATH   where the local stack writes its kubeconfig (default .dev)
  -h, --help   this text

Ctrl-C stops everything.`;
}

/** Parses the task's flags; relative paths are resolved against `cwd`. */
export function parseDevFlags(args: string[], cwd: string): DevFlags {
  let values: { dir?: string; local?: boolean; help?: boolean };
  try {
    values = parseArgs({
      args,
      options: {
        dir: { type: "string" },
        local: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new DevUsageError(errorMessage(err));
  }
  const dir = values.dir ?? `${REPO_ROOT}/.dev`;
  return {
    dir: isAbsolute(dir) ? dir : resolve(cwd, dir),
    local: values.local ?? false,
    help: values.help ?? false,
  };
}

/**
 * The arguments after `deno` of a deno.json task that is a plain `deno run …` command, so the
 * children run with exactly the permissions their task grants.
 */
export function taskArgs(tasks: Record<string, unknown>, name: string): string[] {
  const command = tasks[name];
  if (typeof command !== "string") throw new Error(`deno.json has no task ${name}`);
  const words = command.trim().split(/\s+/);
  if (words[0] !== "deno" || words[1] !== "run" || /[|&;<>()$`"'\\*?]/.test(command)) {
    throw new Error(`task ${name} is not a plain "deno run" command: ${command}`);
  }
  return words.slice(1);
}

async function readTasks(): Promise<Record<string, unknown>> {
  const config: unknown = JSON.parse(await Deno.readTextFile(`${REPO_ROOT}/deno.json`));
  const tasks = (config as { tasks?: unknown }).tasks;
  if (typeof tasks !== "object" || tasks === null) throw new Error("deno.json has no tasks");
  return tasks as Record<string, unknown>;
}

/** The pieces of output: dev's own lines, children's prefixed lines, the banner. */
class Output {
  readonly #color = Deno.stderr.isTerminal() && !Deno.env.get("NO_COLOR");
  readonly #colors: Record<string, string> = { operator: "36", sim: "35" };

  say(text: string): void {
    console.error(`dev: ${text}`);
  }

  /** A writer for one child's lines: `name | line`, the name coloured on a terminal. */
  child(name: string): (line: string) => void {
    const label = name.padEnd(8);
    const prefix = this.#color
      ? `\x1b[${this.#colors[name] ?? "33"}m${label}\x1b[0m | `
      : `${label} | `;
    return (line) => console.error(prefix + line);
  }
}

/** Something that is running and can be stopped; stop() never throws. */
interface Part {
  name: string;
  stop(): Promise<void>;
}

/** Signals that end a dev session. */
const STOP_SIGNALS: Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/** Resolves with the first stop signal's name; dispose() removes the listeners. */
function stopSignals(): { received: Promise<string>; dispose(): void } {
  let resolveSignal: (name: string) => void = () => {};
  const received = new Promise<string>((r) => (resolveSignal = r));
  const listeners = STOP_SIGNALS.map((sig) => {
    const listener = () => resolveSignal(sig);
    Deno.addSignalListener(sig, listener);
    return [sig, listener] as const;
  });
  return {
    received,
    dispose() {
      for (const [sig, listener] of listeners) Deno.removeSignalListener(sig, listener);
    },
  };
}

/** Stops the parts last-started first, reporting (not throwing) failures. */
async function stopAll(parts: Part[], out: Output): Promise<void> {
  for (const part of [...parts].reverse()) {
    try {
      await part.stop();
    } catch (err) {
      out.say(`stopping ${part.name} failed: ${errorMessage(err)}`);
    }
  }
}

function childPart(child: DevChild, graceMs: number): Part {
  return { name: child.name, stop: async () => void await child.stop(graceMs) };
}

/** Resolves with a line naming the part when a child exits; never rejects. */
function childDeath(child: DevChild, label: string): Promise<string> {
  return child.status.then((status) => `${label} ${describeExit(status)}`);
}

/** `http://host:port` for a bind address (a wildcard host is reached on loopback). */
function localUrl(address: string): string | undefined {
  const bind = parseBindAddress(address);
  if (!bind) return undefined;
  const host = !bind.hostname || bind.hostname === "0.0.0.0" || bind.hostname === "::"
    ? "127.0.0.1"
    : bind.hostname.includes(":")
    ? `[${bind.hostname}]`
    : bind.hostname;
  return `http://${host}:${bind.port}`;
}

/** `127.0.0.1:<preferred>` when that port is free, else another free loopback port. */
function loopbackAddress(preferred: number): string {
  try {
    Deno.listen({ hostname: "127.0.0.1", port: preferred }).close();
    return `127.0.0.1:${preferred}`;
  } catch {
    return `127.0.0.1:${freePort()}`;
  }
}

/** Where `program` is on PATH, or undefined. */
function onPath(program: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (!dir) continue;
    try {
      const info = Deno.statSync(`${dir}/${program}`);
      if (info.isFile && ((info.mode ?? 0o755) & 0o111) !== 0) return `${dir}/${program}`;
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

/**
 * Takes the state folder for this process, or returns the one-line reason it cannot: another
 * live dev task holds it (a pid file left by one that was killed does not count).
 */
async function lockStateDir(dir: string): Promise<string | undefined> {
  await Deno.mkdir(`${dir}/pids`, { recursive: true });
  const lock = `${dir}/dev.pid`;
  const holder = Number(await Deno.readTextFile(lock).catch(() => ""));
  if (holder > 0 && holder !== Deno.pid) {
    const cmdline = await Deno.readTextFile(`/proc/${holder}/cmdline`).catch(() => "");
    if (cmdline.includes("dev.ts")) {
      return `another \`deno task dev\` (pid ${holder}) uses ${dir}; stop it first or pass --dir`;
    }
  }
  await Deno.writeTextFile(lock, String(Deno.pid));
  return undefined;
}

/** What to print once the local stack is up. */
export function readyBanner(opts: {
  kubeconfig: string;
  server: string;
  registry: string;
  nodes: string[];
  metricsUrl?: string;
  kubectl?: string;
  cwd: string;
}): string {
  const example = (file: string) => {
    const path = file ? `${REPO_ROOT}/examples/${file}` : `${REPO_ROOT}/examples`;
    const rel = relative(opts.cwd, path);
    return rel.startsWith("..") ? path : rel;
  };
  const lines = [
    "",
    `kubeconfig: ${opts.kubeconfig}`,
    `  API server ${opts.server}, registry ${opts.registry},`,
    `  nodes ${opts.nodes.join(", ")} (pool ${SIM_NODES.pool}, ${SIM_NODES.seats} seats each)` +
    (opts.metricsUrl ? `, operator metrics ${opts.metricsUrl}/metrics` : ""),
    "",
    "In another terminal:",
    ...(opts.kubectl ? [`  alias kubectl=${opts.kubectl}`] : []),
    `  export KUBECONFIG=${opts.kubeconfig}`,
    `  kubectl apply -f ${example("cocoonset-basic.yaml")}`,
    "  kubectl get cs.cocoonset.cocoonstack.io   # plain `cs` is ComponentStatus; or: cocoonsets",
    "  kubectl get pods -w",
    `  kubectl apply -f ${example("hibernation.yaml")}`,
    "  kubectl get cocoonhibernations -w",
    `More in ${example("")}/. Ctrl-C stops everything.`,
    "",
  ];
  return lines.join("\n");
}

/**
 * What keeps the local stack from starting, as the one line to print, or undefined. Nothing is
 * installed on the user's behalf: the line says how.
 */
export function localStackBlocker(facts: {
  registryInstalled: boolean;
  binariesBuilt: boolean;
  goOnPath: boolean;
}): string | undefined {
  if (!facts.registryInstalled) {
    return `${REGISTRY_BIN} is missing; install it with \`sudo apt-get install docker-registry\` ` +
      "and run `deno task dev` again";
  }
  if (!facts.binariesBuilt && !facts.goOnPath) {
    return "building kube-apiserver, etcd and kubectl needs Go, and `go` is not on PATH; install " +
      "Go (https://go.dev/dl/) or set ENVTEST_BIN_DIR to a folder holding the three binaries";
  }
  return undefined;
}

/** Runs the local stack until a stop signal or a part's death; returns the exit code. */
async function runLocalStack(flags: DevFlags, out: Output): Promise<number> {
  let binDir = await existingEnvtestBinDir();
  const blocker = localStackBlocker({
    registryInstalled: registryAvailable(),
    binariesBuilt: binDir !== undefined,
    goOnPath: onPath("go") !== undefined,
  });
  if (blocker) {
    out.say(blocker);
    return EXIT_SETUP;
  }
  // The operator's settings are checked before anything starts (the registry address is not
  // known yet; a placeholder of the same shape stands in for it).
  const operatorSettings: Record<string, string> = {
    LEADER_ELECT: "false",
    OPERATOR_LOG_FORMAT: Deno.env.get("OPERATOR_LOG_FORMAT") || "text",
    METRICS_ADDR: Deno.env.get("METRICS_ADDR") || loopbackAddress(8080),
    PROBE_ADDR: Deno.env.get("PROBE_ADDR") || loopbackAddress(8081),
  };
  let config: Config;
  try {
    config = parseConfig([], {
      ...Deno.env.toObject(),
      ...operatorSettings,
      OCI_REGISTRY: `127.0.0.1:5000/${REGISTRY_PREFIX}`,
    });
  } catch (err) {
    out.say(errorMessage(err).split("\n")[0]);
    return EXIT_SETUP;
  }
  const refused = await lockStateDir(flags.dir);
  if (refused) {
    out.say(refused);
    return EXIT_SETUP;
  }
  const kubeconfig = `${flags.dir}/kubeconfig`;
  const pidDir = `${flags.dir}/pids`;
  const signals = stopSignals();
  const parts: Part[] = [];
  const deaths: Promise<string>[] = [];
  let watchdog: Watchdog | undefined;
  // Start-up steps are not cut short: a signal during one is acted on when it has finished.
  let stopRequested = false;
  signals.received.then(() => (stopRequested = true));
  let stoppedBySignal = false;
  /**
   * Waits for a start-up step, unless a part dies first (throws its line) or a stop signal comes
   * (returns undefined; the caller then returns and everything started is stopped).
   */
  const unlessInterrupted = async <T>(step: Promise<T>): Promise<{ value: T } | undefined> => {
    const died = Promise.race(deaths).then((line): never => {
      throw new Error(line);
    });
    return await Promise.race([
      step.then((value) => ({ value })),
      died,
      signals.received.then(() => undefined),
    ]);
  };
  try {
    if (!binDir) {
      out.say(
        "building kube-apiserver, etcd and kubectl from source (first run only; this takes " +
          "several minutes, progress below)",
      );
      binDir = await envtestBinDir();
    }
    // envtest reads the folder from here; the control plane then finds the binaries at once.
    Deno.env.set("ENVTEST_BIN_DIR", binDir);
    if (stopRequested) return 0;

    watchdog = spawnWatchdog({ pidDir, detached: true });
    out.say("starting etcd and kube-apiserver (installing the CRDs from config/crd/bases)");
    const cp: ControlPlane = await startControlPlane({ detached: true });
    parts.push({ name: "kube-apiserver and etcd", stop: () => cp.stop() });
    deaths.push(cp.unexpectedExit);
    await Deno.writeTextFile(kubeconfig, await Deno.readTextFile(cp.kubeconfigPath), {
      mode: 0o600,
    });
    parts.push({
      name: "the kubeconfig",
      stop: () => Deno.remove(kubeconfig).catch(() => {}),
    });
    if (stopRequested) return 0;

    out.say("starting docker-registry");
    const registry = await startRegistry({ auth: "none", detached: true });
    parts.push({ name: "docker-registry", stop: () => registry.stop() });
    deaths.push(registry.unexpectedExit);
    const ociRegistry = `${registry.host}/${REGISTRY_PREFIX}`;
    if (stopRequested) return 0;

    const tasks = await readTasks();
    const childEnv = { KUBECONFIG: kubeconfig, OCI_REGISTRY: ociRegistry };
    out.say(`starting the VM simulator (${SIM_NODES.count} nodes)`);
    const sim = spawnDevChild({
      name: "sim",
      command: Deno.execPath(),
      args: [
        ...taskArgs(tasks, "sim"),
        `--kubeconfig=${kubeconfig}`,
        `--registry=${ociRegistry}`,
        `--nodes=${SIM_NODES.count}`,
        `--node-prefix=${SIM_NODES.prefix}`,
        `--pool=${SIM_NODES.pool}`,
        `--seats=${SIM_NODES.seats}`,
        ...SIM_LATENCY_FLAGS,
        "--log-format=text",
      ],
      env: childEnv,
      cwd: REPO_ROOT,
      pidDir,
      onLine: out.child("sim"),
    });
    parts.push(childPart(sim, SIM_GRACE_MS));
    deaths.push(childDeath(sim, "the simulator"));
    const simReady = await unlessInterrupted(sim.waitForLine(/ready: nodes=/, READY_TIMEOUT_MS));
    if (!simReady) return 0;
    const nodes = simReady.value.match(/ready: nodes=(\S+)/)?.[1]?.split(",") ?? [];

    out.say("starting the operator");
    const operator = spawnDevChild({
      name: "operator",
      command: Deno.execPath(),
      args: taskArgs(tasks, "start"),
      env: { ...childEnv, ...operatorSettings },
      cwd: REPO_ROOT,
      pidDir,
      onLine: out.child("operator"),
    });
    parts.push(childPart(operator, OPERATOR_GRACE_MS));
    deaths.push(childDeath(operator, "the operator"));
    const probe = localUrl(config.healthProbeBindAddress);
    if (probe) {
      const ready = waitUntil(async () => {
        const res = await fetch(`${probe}/readyz`);
        await res.body?.cancel();
        return res.ok;
      }, { timeoutMs: READY_TIMEOUT_MS, intervalMs: 200, what: "the operator's /readyz" });
      if (!await unlessInterrupted(ready)) return 0;
    }

    console.log(readyBanner({
      kubeconfig,
      server: cp.server,
      registry: ociRegistry,
      nodes,
      metricsUrl: localUrl(config.metricsBindAddress),
      kubectl: onPath("kubectl") ? undefined : `${binDir}/kubectl`,
      cwd: Deno.cwd(),
    }));

    const outcome = await Promise.race([
      signals.received.then((sig) => ({ signal: sig, died: undefined })),
      ...deaths.map((p) => p.then((line) => ({ signal: undefined, died: line }))),
    ]);
    if (outcome.died) {
      out.say(`${outcome.died}; stopping the rest of the stack`);
      return 1;
    }
    out.say(
      `received ${outcome.signal}; stopping the operator, the simulator, the registry, ` +
        "kube-apiserver and etcd",
    );
    stoppedBySignal = true;
    return 0;
  } catch (err) {
    out.say(`the local stack did not start: ${errorMessage(err)}`);
    return 1;
  } finally {
    await stopAll(parts, out);
    await watchdog?.dismiss();
    await Deno.remove(`${flags.dir}/dev.pid`).catch(() => {});
    await Deno.remove(pidDir, { recursive: true }).catch(() => {});
    signals.dispose();
    if (stoppedBySignal) out.say("stopped; temporary files removed");
  }
}

/** Runs the operator against a configured cluster; returns the exit code. */
async function runAgainstCluster(
  source: Parameters<typeof describeSource>[0],
  out: Output,
): Promise<number> {
  const where = describeSource(source);
  const env = Deno.env.toObject();
  if (!env.OCI_REGISTRY) {
    out.say(
      `OCI_REGISTRY must be set to run the operator against the cluster of ${where}; ` +
        "or pass --local for a local stack with a registry of its own",
    );
    return EXIT_SETUP;
  }
  const operatorEnv: Record<string, string> = {
    LEADER_ELECT: env.LEADER_ELECT || "false",
    OPERATOR_LOG_FORMAT: env.OPERATOR_LOG_FORMAT || "text",
  };
  const view = { ...env, ...operatorEnv };
  let config: Config;
  try {
    // Bad settings are the user's to fix, like the operator's own exit 2 for them.
    config = parseConfig([], view);
  } catch (err) {
    out.say(errorMessage(err).split("\n")[0]);
    return EXIT_SETUP;
  }
  try {
    const transport = await connect(config, (name) => view[name] || undefined, {
      userAgent: "cocoon-operator-dev",
      unreachableHint: "pass --local for a local stack instead",
      // This is the dev tool's own reachability check under `deno task dev`'s -A; the operator
      // it starts next checks its own (scoped) permissions.
      checkExtraPermissions: false,
    });
    transport.close();
  } catch (err) {
    out.say(errorMessage(err).split("\n")[0]);
    return err instanceof PreflightError ? EXIT_SETUP : 1;
  }
  out.say(`running the operator against ${where}, OCI_REGISTRY=${env.OCI_REGISTRY}`);
  const signals = stopSignals();
  const operator = spawnDevChild({
    name: "operator",
    command: Deno.execPath(),
    args: taskArgs(await readTasks(), "start"),
    env: operatorEnv,
    cwd: REPO_ROOT,
    onLine: out.child("operator"),
  });
  try {
    const outcome = await Promise.race([
      signals.received.then(() => undefined),
      operator.status,
    ]);
    if (outcome === undefined) {
      const status = await operator.stop(OPERATOR_GRACE_MS);
      return status.success || status.signal === "SIGTERM" ? 0 : status.code || 1;
    }
    if (!outcome.success) out.say(`the operator ${describeExit(outcome)}`);
    return outcome.code;
  } finally {
    await operator.stop(OPERATOR_GRACE_MS);
    signals.dispose();
  }
}

/** The task; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  const out = new Output();
  let flags: DevFlags;
  try {
    flags = parseDevFlags(args, Deno.cwd());
  } catch (err) {
    out.say(`${errorMessage(err)} (see --help)`);
    return EXIT_SETUP;
  }
  if (flags.help) {
    console.log(devUsage());
    return 0;
  }
  const mode = flags.local
    ? { kind: "local" as const }
    : chooseDevMode((name) => Deno.env.get(name), `${flags.dir}/kubeconfig`, Deno.cwd());
  if (mode.kind === "refuse") {
    out.say(mode.message);
    return EXIT_SETUP;
  }
  if (mode.kind === "cluster") return await runAgainstCluster(mode.source, out);
  if ("note" in mode && mode.note) out.say(mode.note);
  return await runLocalStack(flags, out);
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
