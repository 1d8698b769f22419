/**
 * The VM simulator as a process (`deno task sim`): registers the virtual nodes on the cluster of
 * the kubeconfig, then schedules and runs cocoon pods until SIGINT / SIGTERM, when it stops
 * cleanly and exits 0. Bad flags print one line and exit 2; a failed start exits 1. Logs are
 * LogTape lines (JSON unless --log-format text) under `cocoon-operator.sim.*`.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { setupLogging } from "../common/log.ts";
import { ApiClient } from "../kube/api_client.ts";
import { loadRestConfig, Transport } from "../kube/transport.ts";
import { errorMessage } from "../kube/errors.ts";
import { parseSimConfig, type SimConfig, usage } from "./flags.ts";
import { startSimulator } from "./simulator.ts";
import { SimEventLog } from "./events.ts";
import { serveSimStatus } from "./status_server.ts";

const log = getLogger(["cocoon-operator", "sim", "main"]);

/** Runs the simulator process; returns the exit code. */
export async function main(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  let config: SimConfig;
  try {
    config = parseSimConfig(args, env);
  } catch (err) {
    console.error(`cocoon-sim: ${errorMessage(err)}`);
    return 2;
  }
  if (config.help) {
    console.log(usage());
    return 0;
  }
  await setupLogging({ level: config.logLevel, format: config.logFormat });

  const stop = new AbortController();
  const handlers = (["SIGINT", "SIGTERM"] as const).map((signal) => {
    const handler = () => {
      log.info("received {signal}, stopping", { signal });
      stop.abort();
    };
    Deno.addSignalListener(signal, handler);
    return [signal, handler] as const;
  });
  let transport: Transport | undefined;
  let status: Deno.HttpServer | undefined;
  try {
    transport = new Transport({
      ...(await loadRestConfig(config.kubeconfig)),
      userAgent: "cocoon-vm-simulator",
    });
    const events = new SimEventLog();
    const sim = await startSimulator({
      client: new ApiClient(transport, "cocoon-vm-simulator"),
      registry: { url: config.registry },
      nodes: config.nodes,
      namespace: config.namespace,
      latencies: config.latencies,
      knobs: {
        ...(config.fail ? { fail: config.fail } : {}),
        ...(config.failMessage ? { failMessage: config.failMessage } : {}),
        ...(config.pushFail ? { pushFail: true } : {}),
        ...(config.silentLifecycle
          ? { silentLifecycle: true, removeDelayMs: config.removeDelayMs }
          : {}),
      },
      scheduler: config.scheduler,
      workers: config.workers,
      removeNodesOnStop: config.removeNodesOnStop,
      ...(config.statusAddr ? { onEvent: (ev) => events.record(ev) } : {}),
    });
    if (config.statusAddr) {
      status = serveSimStatus({
        sim,
        events,
        hostname: config.statusAddr.hostname ?? "0.0.0.0",
        port: config.statusAddr.port,
        onListen: (addr) =>
          log.info("status endpoint on http://{host}:{port}", {
            host: addr.hostname,
            port: addr.port,
          }),
      });
    }
    log.info("ready: nodes={nodes} registry={registry}", {
      nodes: sim.nodes.map((n) => n.name).join(","),
      registry: config.registry,
    });
    if (!stop.signal.aborted) {
      await new Promise<void>((resolve) => stop.signal.addEventListener("abort", () => resolve()));
    }
    await status?.shutdown();
    status = undefined;
    await sim.stop();
    log.info("stopped: {counters}", { counters: JSON.stringify(sim.counters) });
    return 0;
  } catch (err) {
    log.error("simulator failed: {error}", { error: errorMessage(err) });
    return 1;
  } finally {
    for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);
    await status?.shutdown();
    transport?.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args, Deno.env.toObject()));
}
