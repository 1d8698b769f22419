/**
 * A simulator on the in-memory API (kube/testing/fake.ts) with the stub registry, for the
 * simulator's unit tests: one call to start, one to tear everything down.
 *
 * @module
 */
import { FakeClient } from "../../kube/testing/fake.ts";
import { type Simulator, type SimulatorOptions, startSimulator } from "../simulator.ts";
import { type OciStub, startOciStub } from "./oci_stub.ts";

/** A running simulator and its doubles. */
export interface FakeSim {
  fake: FakeClient;
  stub: OciStub;
  sim: Simulator;
  /** Repository of a VM in the stub (the registry address has the prefix `sim`). */
  repo(vmName: string): string;
  close(): Promise<void>;
}

/** Starts a simulator (zero latencies unless given) on a fresh fake API and stub registry. */
export async function startFakeSim(
  opts: Partial<Omit<SimulatorOptions, "client" | "registry">> = {},
  fake = new FakeClient(),
): Promise<FakeSim> {
  const stub = startOciStub();
  try {
    const sim = await startSimulator({
      nodes: [{ name: "vk-a", seats: 4 }],
      ...opts,
      latencies: { bootMs: 0, wakeMs: 0, hibernateMs: 0, deleteMs: 0, ...opts.latencies },
      client: fake,
      registry: { url: `${stub.host}/sim` },
    });
    return {
      fake,
      stub,
      sim,
      repo: (vmName) => `sim/${vmName}`,
      async close() {
        await sim.stop();
        await stub.close();
      },
    };
  } catch (err) {
    await stub.close();
    throw err;
  }
}
