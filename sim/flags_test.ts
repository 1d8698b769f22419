import assert from "node:assert/strict";
import { parseSimConfig, SimConfigError, usage } from "./flags.ts";

Deno.test("flags: defaults give three default-pool nodes and small latencies", () => {
  const c = parseSimConfig([], { OCI_REGISTRY: "127.0.0.1:5000/cocoon" });
  assert.equal(c.registry, "127.0.0.1:5000/cocoon");
  assert.deepEqual(c.nodes.map((n) => [n.name, n.pool, n.seats]), [
    ["cocoon-sim-0", "default", 8],
    ["cocoon-sim-1", "default", 8],
    ["cocoon-sim-2", "default", 8],
  ]);
  assert.deepEqual(c.latencies, { bootMs: 100, wakeMs: 100, hibernateMs: 150, deleteMs: 50 });
  assert.equal(c.scheduler, true);
  assert.equal(c.logLevel, "info");
  assert.equal(c.fail, undefined);
});

Deno.test("flags: node specs, latencies and global knobs", () => {
  const c = parseSimConfig([
    "--registry=localhost:5000",
    "--node",
    "vk-a:gpu:2:zen4",
    "--node=vk-b",
    "--boot-ms=0",
    "--hibernate-ms",
    "2000",
    "--fail=pod-failed",
    "--fail-message=boom",
    "--push-fail",
    "--no-scheduler",
    "--log-level=debug",
    "--log-format=text",
  ], {});
  assert.deepEqual(c.nodes, [
    { name: "vk-a", pool: "gpu", seats: 2, cpuClass: "zen4" },
    { name: "vk-b", seats: 8 },
  ]);
  assert.equal(c.latencies.bootMs, 0);
  assert.equal(c.latencies.hibernateMs, 2000);
  assert.equal(c.fail, "pod-failed");
  assert.equal(c.failMessage, "boom");
  assert.equal(c.pushFail, true);
  assert.equal(c.scheduler, false);
  assert.equal(c.logFormat, "text");
  assert.equal(c.statusAddr, undefined, "no status endpoint unless asked");
});

Deno.test("flags: --status-addr takes a bind address", () => {
  const env = { OCI_REGISTRY: "127.0.0.1:5000" };
  assert.deepEqual(parseSimConfig(["--status-addr=127.0.0.1:9090"], env).statusAddr, {
    hostname: "127.0.0.1",
    port: 9090,
  });
  assert.throws(() => parseSimConfig(["--status-addr=9090"], env), /--status-addr/);
});

Deno.test("flags: bad input is one SimConfigError naming the flag", () => {
  const env = { OCI_REGISTRY: "127.0.0.1:5000" };
  assert.throws(() => parseSimConfig([], {}), /--registry \(or OCI_REGISTRY\) is required/);
  assert.throws(() => parseSimConfig(["--boot-ms=-1"], env), /--boot-ms/);
  assert.throws(() => parseSimConfig(["--seats=x"], env), SimConfigError);
  assert.throws(() => parseSimConfig(["--fail=crash"], env), /--fail/);
  assert.throws(() => parseSimConfig(["--workers=0"], env), /--workers/);
  assert.throws(() => parseSimConfig(["--bogus"], env), SimConfigError);
  assert.equal(parseSimConfig(["--help"], {}).help, true);
  assert.match(usage(), /--node NAME\[:POOL\[:SEATS\[:CLASS\]\]\]/);
});
