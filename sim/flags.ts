/**
 * The simulator process's command line (`deno task sim -- --help`), parsed and validated before
 * anything connects. Every flag has a default; the registry also comes from OCI_REGISTRY, so
 * one environment serves the operator and its simulator.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { type LogFormat, parseLogFormat } from "../common/log.ts";
import { type LogLevelName, parseLogLevelName } from "../common/log_level.ts";
import { type FailMode, parseFailMode } from "./knobs.ts";
import { DEFAULT_LATENCIES, type Latencies } from "./kubelet.ts";
import type { SimNode } from "./nodes.ts";
import { type BindAddress, parseBindAddress } from "../kube/bind_address.ts";
import { errorMessage } from "../kube/errors.ts";

/** Everything sim/main.ts needs. */
export interface SimConfig {
  /** Kubeconfig file; undefined = $KUBECONFIG, ~/.kube/config, then in-cluster. */
  kubeconfig?: string;
  /** Registry address (OCI_REGISTRY form, loopback). */
  registry: string;
  nodes: SimNode[];
  namespace?: string;
  latencies: Latencies;
  fail?: FailMode;
  failMessage?: string;
  pushFail: boolean;
  /** Play vk-cocoon HEAD: no lifecycle annotations, save → push → remove. */
  silentLifecycle: boolean;
  /** With silentLifecycle: ms between the `:hibernate` push and the VM's removal. */
  removeDelayMs: number;
  scheduler: boolean;
  workers: number;
  removeNodesOnStop: boolean;
  /** Where to serve the status endpoint (sim/status_server.ts); undefined = not served. */
  statusAddr?: BindAddress;
  logLevel: LogLevelName;
  logFormat: LogFormat;
  help: boolean;
}

/** Bad command line; one line for stderr (exit 2). */
export class SimConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SimConfigError";
  }
}

const OPTIONS = {
  kubeconfig: { type: "string" },
  registry: { type: "string" },
  nodes: { type: "string" },
  "node-prefix": { type: "string" },
  pool: { type: "string" },
  seats: { type: "string" },
  "cpu-class": { type: "string" },
  node: { type: "string", multiple: true },
  namespace: { type: "string" },
  "boot-ms": { type: "string" },
  "wake-ms": { type: "string" },
  "hibernate-ms": { type: "string" },
  "delete-ms": { type: "string" },
  fail: { type: "string" },
  "fail-message": { type: "string" },
  "push-fail": { type: "boolean" },
  "silent-lifecycle": { type: "boolean" },
  "remove-delay-ms": { type: "string" },
  "no-scheduler": { type: "boolean" },
  workers: { type: "string" },
  "remove-nodes-on-stop": { type: "boolean" },
  "status-addr": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** The --help text. */
export function usage(): string {
  return `cocoon VM simulator: virtual nodes, scheduler and vk-cocoon for tests and local runs

usage: deno task sim [flags]

  --kubeconfig PATH        kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --registry ADDR          loopback OCI registry, host:port[/prefix] (default: $OCI_REGISTRY)
  --nodes N                number of nodes <prefix>0..<prefix>N-1 (default 3)
  --node-prefix P          node name prefix (default cocoon-sim-)
  --pool NAME              cocoonstack.io/pool of those nodes (default default)
  --seats N                pods per node (default 8)
  --cpu-class NAME         cocoonstack.io/snapshot-cpu-class of those nodes (default none)
  --node NAME[:POOL[:SEATS[:CLASS]]]
                           one node, repeatable; replaces --nodes/--pool/--seats/--cpu-class
  --namespace NS           only handle pods of NS (default all namespaces)
  --boot-ms MS             boot latency (default ${DEFAULT_LATENCIES.bootMs})
  --wake-ms MS             wake latency (default ${DEFAULT_LATENCIES.wakeMs})
  --hibernate-ms MS        hibernate latency (default ${DEFAULT_LATENCIES.hibernateMs})
  --delete-ms MS           delete latency (default ${DEFAULT_LATENCIES.deleteMs})
  --fail MODE              fail every VM: lifecycle | pod-failed
  --fail-message TEXT      message of those failures
  --push-fail              refuse every registry push
  --silent-lifecycle       play vk-cocoon as it is today: no lifecycle annotations, and a
                           hibernation as save, push, then remove (the VM id cleared last)
  --remove-delay-ms MS     with --silent-lifecycle: time from the push to the removal (default 0)
  --no-scheduler           do not bind pods (a real scheduler does)
  --workers N              concurrent VM workers (default 32)
  --remove-nodes-on-stop   delete the Node objects on exit
  --status-addr HOST:PORT  serve seats, counters, VM states and events as JSON (default: off)
  --log-level LEVEL        debug | info | warn | error (default: $SIM_LOG_LEVEL or info)
  --log-format FORMAT      json | text (default json)
  -h, --help               this text

Per-pod knobs: annotations sim.cocoonstack.io/fail, fail-message, boot-delay-ms,
hibernate-delay-ms, push-fail, lifecycle (silent | annotated), remove-delay-ms.`;
}

function count(flag: string, raw: string | undefined, fallback: number, min = 0): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min) {
    throw new SimConfigError(`--${flag}: want a whole number ≥ ${min}, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

function parseNodeSpec(raw: string): SimNode {
  const [name, pool, seats, cpuClass] = raw.split(":");
  if (!name) throw new SimConfigError(`--node ${JSON.stringify(raw)}: missing name`);
  return {
    name,
    ...(pool ? { pool } : {}),
    seats: count("node", seats || undefined, 8),
    ...(cpuClass ? { cpuClass } : {}),
  };
}

function parseFlags(args: string[]) {
  try {
    return parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: false });
  } catch (err) {
    throw new SimConfigError(errorMessage(err));
  }
}

/** Parses argv (without the program name) and the environment. */
export function parseSimConfig(args: string[], env: Record<string, string | undefined>): SimConfig {
  const { values } = parseFlags(args);
  let logLevel: LogLevelName;
  let logFormat: LogFormat;
  try {
    logLevel = parseLogLevelName(values["log-level"] ?? env.SIM_LOG_LEVEL ?? "info");
    logFormat = parseLogFormat(values["log-format"] ?? "json");
  } catch (err) {
    throw new SimConfigError(errorMessage(err));
  }
  const help = values.help ?? false;
  const registry = values.registry ?? env.OCI_REGISTRY ?? "";
  if (!registry && !help) throw new SimConfigError("--registry (or OCI_REGISTRY) is required");
  let fail: FailMode | undefined;
  if (values.fail !== undefined) {
    fail = parseFailMode(values.fail);
    if (!fail) throw new SimConfigError(`--fail: want lifecycle or pod-failed, got ${values.fail}`);
  }
  let nodes: SimNode[];
  if (values.node && values.node.length > 0) {
    nodes = values.node.map(parseNodeSpec);
  } else {
    const n = count("nodes", values.nodes, 3);
    const prefix = values["node-prefix"] ?? "cocoon-sim-";
    const seats = count("seats", values.seats, 8);
    nodes = Array.from({ length: n }, (_, i) => ({
      name: `${prefix}${i}`,
      pool: values.pool ?? "default",
      seats,
      ...(values["cpu-class"] ? { cpuClass: values["cpu-class"] } : {}),
    }));
  }
  let statusAddr: BindAddress | undefined;
  try {
    statusAddr = parseBindAddress(values["status-addr"] ?? "");
  } catch (err) {
    throw new SimConfigError(`--status-addr: ${errorMessage(err)}`);
  }
  return {
    kubeconfig: values.kubeconfig,
    registry,
    nodes,
    namespace: values.namespace,
    latencies: {
      bootMs: count("boot-ms", values["boot-ms"], DEFAULT_LATENCIES.bootMs),
      wakeMs: count("wake-ms", values["wake-ms"], DEFAULT_LATENCIES.wakeMs),
      hibernateMs: count("hibernate-ms", values["hibernate-ms"], DEFAULT_LATENCIES.hibernateMs),
      deleteMs: count("delete-ms", values["delete-ms"], DEFAULT_LATENCIES.deleteMs),
    },
    fail,
    failMessage: values["fail-message"],
    pushFail: values["push-fail"] ?? false,
    silentLifecycle: values["silent-lifecycle"] ?? false,
    removeDelayMs: count("remove-delay-ms", values["remove-delay-ms"], 0),
    scheduler: !(values["no-scheduler"] ?? false),
    workers: count("workers", values.workers, 32, 1),
    removeNodesOnStop: values["remove-nodes-on-stop"] ?? false,
    ...(statusAddr ? { statusAddr } : {}),
    logLevel,
    logFormat,
    help,
  };
}
