import assert from "node:assert/strict";
import { registryAvailable } from "./registry.ts";
import { startStack } from "./stack.ts";

Deno.test({
  name: "stack: a start that fails half-way rejects with the cause",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await assert.rejects(
      startStack({ nodes: [{ name: "Not_A_Node", seats: 1 }] }),
      /not a valid node name/,
    );
  },
});

Deno.test({
  name: "stack: stop() ends every process cleanly and is idempotent",
  ignore: !registryAvailable(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const stack = await startStack({ nodes: [{ name: "vk-a", seats: 1 }] });
    let stopped = false;
    try {
      assert.deepEqual((await stack.sim.status()).nodes.map((n) => [n.name, n.seats, n.used]), [
        ["vk-a", 1, 0],
      ]);
      assert.ok(stack.alive(0));
      await stack.assertOperatorsHealthy();
      for (const url of [stack.registry.url, stack.cp.server, stack.sim.statusUrl]) {
        const { hostname, port } = new URL(url);
        (await Deno.connect({ hostname, port: Number(port) })).close();
      }
      await stack.stop();
      stopped = true;
      assert.equal((await stack.sim.proc.status).code, 0, stack.sim.proc.output);
      assert.equal((await stack.operators[0].proc.status).code, 0);
      assert.ok(!stack.alive(0));
      for (const url of [stack.registry.url, stack.cp.server, stack.sim.statusUrl]) {
        const { hostname, port } = new URL(url);
        await assert.rejects(Deno.connect({ hostname, port: Number(port) }), `${url} is closed`);
      }
      await stack.stop();
    } finally {
      if (!stopped) await stack.stop();
    }
  },
});
