/**
 * The simulator's status endpoint, for tests and tools that run the simulator as a process
 * (`deno task sim -- --status-addr 127.0.0.1:9090`) and need what an in-process caller reads
 * from the Simulator handle: seats per node, counters, one VM's state, the event stream, and
 * changing a node's seats. Plain JSON over loopback HTTP, no authentication: a dev tool.
 *
 * | request                          | answer                                                 |
 * | -------------------------------- | ------------------------------------------------------ |
 * | `GET /status`                    | `{ nodes: [{ name, pool, cpuClass, seats, used }], counters }` |
 * | `GET /vms/<namespace>/<pod>`     | the pod's VmInfo, 404 when the simulator has none      |
 * | `GET /events?since=<seq>`        | `{ events: [{ seq, type, ..., at }], next }` (numbered after `since`) |
 * | `PUT /nodes/<node>/seats`        | body `{ "seats": n }`: Simulator.setSeats; 204         |
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { errorMessage } from "../kube/errors.ts";
import type { SimEventLog } from "./events.ts";
import type { Simulator } from "./simulator.ts";

const log = getLogger(["cocoon-operator", "sim", "status"]);

/** One node as the status endpoint reports it. */
export interface NodeSeats {
  name: string;
  pool: string;
  cpuClass: string;
  seats: number;
  /** Seats taken by the scheduler's count (terminating pods included). */
  used: number;
}

/** What serveSimStatus needs. */
export interface SimStatusOptions {
  sim: Simulator;
  /** The simulator's events (fed by its onEvent). */
  events: SimEventLog;
  hostname: string;
  /** 0 picks a free port (see the returned server's addr). */
  port: number;
  /** Called once listening, with the bound address. */
  onListen?: (addr: Deno.NetAddr) => void;
}

/** The seats view of every node. */
function nodeSeats(sim: Simulator): NodeSeats[] {
  return sim.nodes.map((n) => ({
    name: n.name,
    pool: n.pool || "default",
    cpuClass: n.cpuClass ?? "",
    seats: n.seats,
    used: sim.seatsUsed(n.name),
  }));
}

/** Answers one status request (exported for tests; serveSimStatus routes every request here). */
export async function handleStatusRequest(
  req: Request,
  sim: Simulator,
  events: SimEventLog,
): Promise<Response> {
  const url = new URL(req.url);
  const parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent);
  if (req.method === "GET" && parts.length === 1 && parts[0] === "status") {
    return Response.json({ nodes: nodeSeats(sim), counters: sim.counters });
  }
  if (req.method === "GET" && parts.length === 3 && parts[0] === "vms") {
    const vm = sim.vm(parts[1], parts[2]);
    return vm ? Response.json(vm) : Response.json({ error: "no such VM" }, { status: 404 });
  }
  if (req.method === "GET" && parts.length === 1 && parts[0] === "events") {
    const raw = url.searchParams.get("since") ?? "0";
    if (!/^\d+$/.test(raw)) {
      return Response.json({ error: "since: want a number" }, { status: 400 });
    }
    return Response.json(events.since(Number(raw)));
  }
  if (req.method === "PUT" && parts.length === 3 && parts[0] === "nodes" && parts[2] === "seats") {
    let seats: unknown;
    try {
      seats = (await req.json() as { seats?: unknown }).seats;
    } catch {
      seats = undefined;
    }
    if (typeof seats !== "number" || !Number.isInteger(seats) || seats < 0) {
      return Response.json({ error: 'want {"seats": <whole number ≥ 0>}' }, { status: 400 });
    }
    try {
      await sim.setSeats(parts[1], seats);
    } catch (err) {
      return Response.json({ error: errorMessage(err) }, { status: 400 });
    }
    log.info("node {node} now has {seats} seats", { node: parts[1], seats });
    return new Response(null, { status: 204 });
  }
  return Response.json({ error: "not found" }, { status: 404 });
}

/** Serves the status endpoint until the returned server is shut down. */
export function serveSimStatus(opts: SimStatusOptions): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({
    hostname: opts.hostname,
    port: opts.port,
    onListen: (addr) => opts.onListen?.(addr),
  }, (req) => handleStatusRequest(req, opts.sim, opts.events));
}
