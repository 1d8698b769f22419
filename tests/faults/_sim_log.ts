/**
 * The simulator's event stream, collected in the test process for the whole scenario: what
 * each VM did and when (the simulator's clock is this machine's wall clock, as the registry
 * proxy's), read from its status endpoint every few hundred milliseconds. The simulator keeps
 * only its newest 10 000 events; a poll that finds numbers missing fails the collection rather
 * than let a checker judge an incomplete history.
 *
 * @module
 */
import type { NumberedSimEvent } from "../../sim/events.ts";
import type { SimProcess } from "../harness/sim_process.ts";

/** A running collection. */
export interface SimLog {
  /** Events collected so far, in the simulator's order. */
  readonly events: readonly NumberedSimEvent[];
  /** Reads what is new right now (a checker calls it before judging). */
  sync(): Promise<void>;
  /** Stops polling after a last sync. */
  stop(): Promise<void>;
}

/** Starts collecting from the simulator's current position (older events are skipped). */
export async function collectSimEvents(sim: SimProcess, intervalMs = 250): Promise<SimLog> {
  const events: NumberedSimEvent[] = [];
  let next = (await sim.events(Number.MAX_SAFE_INTEGER)).next;
  let failure: Error | undefined;
  let chain = Promise.resolve();
  const pull = async () => {
    const got = await sim.events(next - 1);
    if (got.events.length > 0 && got.events[0].seq !== next) {
      failure ??= new Error(
        `simulator events ${next}..${got.events[0].seq - 1} were dropped before the test read them`,
      );
    }
    events.push(...got.events);
    next = got.next;
  };
  // Polls never overlap: each waits for the previous one.
  const sync = () => (chain = chain.then(pull).catch((err) => {
    failure ??= err instanceof Error ? err : new Error(String(err));
  }));
  const timer = setInterval(() => void sync(), intervalMs);
  return {
    events,
    async sync() {
      await sync();
      if (failure) throw failure;
    },
    async stop() {
      clearInterval(timer);
      await sync();
      if (failure) throw failure;
    },
  };
}
