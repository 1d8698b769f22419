import assert from "node:assert/strict";
import { main } from "./main.ts";

// Bad input must fail before anything connects: no kubeconfig is read, nothing is dialled.
// The test proves it by pointing KUBECONFIG at a path that does not exist — reaching the
// connection step would throw a different error, not return 2.
const noCluster = { KUBECONFIG: "/nonexistent/kubeconfig", HOME: "/nonexistent" };

async function exitCode(args: string[], env: Record<string, string>): Promise<number> {
  const errors: string[] = [];
  const original = console.error;
  console.error = (...parts: unknown[]) => errors.push(parts.join(" "));
  try {
    return await main(args, env);
  } finally {
    console.error = original;
  }
}

Deno.test("main: OCI_REGISTRY unset exits 2 before connecting", async () => {
  assert.equal(await exitCode([], noCluster), 2);
});

Deno.test("main: an unknown flag exits 2", async () => {
  assert.equal(await exitCode(["--bogus"], { ...noCluster, OCI_REGISTRY: "127.0.0.1:5000/c" }), 2);
});

Deno.test("main: concurrency below 1 or not a number exits 2", async () => {
  const env = { ...noCluster, OCI_REGISTRY: "127.0.0.1:5000/c" };
  assert.equal(await exitCode(["--cocoonset-concurrency=0"], env), 2);
  assert.equal(await exitCode([], { ...env, HIBERNATION_CONCURRENCY: "four" }), 2);
});

Deno.test("main: an unparsable bind address exits 2", async () => {
  const env = { ...noCluster, OCI_REGISTRY: "127.0.0.1:5000/c" };
  assert.equal(await exitCode(["--metrics-bind-address=localhost"], env), 2);
  assert.equal(await exitCode([], { ...env, PROBE_ADDR: ":99999" }), 2);
});

Deno.test("main: a malformed OCI_REGISTRY exits 2", async () => {
  assert.equal(
    await exitCode([], { ...noCluster, OCI_REGISTRY: "https://registry.example.com/x" }),
    2,
  );
});

Deno.test("main: --version and --help exit 0", async () => {
  const logs: string[] = [];
  const original = console.log;
  console.log = (...parts: unknown[]) => logs.push(parts.join(" "));
  try {
    assert.equal(await main(["--version"], noCluster), 0);
    assert.equal(await main(["--help"], noCluster), 0);
  } finally {
    console.log = original;
  }
  assert.match(logs[0], /^cocoon-operator \S+/);
  assert.match(logs[1], /--cocoonset-concurrency/);
});
