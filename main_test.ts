import assert from "node:assert/strict";
import { main } from "./main.ts";
import { staticImportClosure } from "./tests/harness/module_graph.ts";

// Bad input must fail before anything connects: no kubeconfig is read, nothing is dialled.
// The test proves it by pointing KUBECONFIG at a path that does not exist — reaching the
// connection step would throw a different error, not return 2.
const NO_CLUSTER = { KUBECONFIG: "/nonexistent/kubeconfig", HOME: "/nonexistent" };

async function exitCode(args: string[], env: Record<string, string>): Promise<number> {
  return (await run(args, env)).code;
}

/** Runs main and returns its exit code and what it wrote to stderr. */
async function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; errors: string[] }> {
  const errors: string[] = [];
  const original = console.error;
  console.error = (...parts: unknown[]) => errors.push(parts.join(" "));
  try {
    return { code: await main(args, env), errors };
  } finally {
    console.error = original;
  }
}

/** The lines main printed that are not JSON log records. */
const plainLines = (errors: string[]) => errors.filter((l) => !l.startsWith("{"));

Deno.test("main: OCI_REGISTRY unset or empty exits 2 before connecting, with one line", async () => {
  // config/manager leaves it undeclared; the Go original's Deployment declares it empty.
  for (const env of [NO_CLUSTER, { ...NO_CLUSTER, OCI_REGISTRY: "" }]) {
    const { code, errors } = await run([], env);
    assert.equal(code, 2);
    assert.deepEqual(plainLines(errors), [
      "cocoon-operator: OCI_REGISTRY must be set (OCI registry base for snapshot manifests)",
    ]);
  }
});

Deno.test("main: an unknown flag exits 2", async () => {
  assert.equal(await exitCode(["--bogus"], { ...NO_CLUSTER, OCI_REGISTRY: "127.0.0.1:5000/c" }), 2);
});

Deno.test("main: concurrency below 1 or not a number exits 2", async () => {
  const env = { ...NO_CLUSTER, OCI_REGISTRY: "127.0.0.1:5000/c" };
  assert.equal(await exitCode(["--cocoonset-concurrency=0"], env), 2);
  assert.equal(await exitCode([], { ...env, HIBERNATION_CONCURRENCY: "four" }), 2);
});

Deno.test("main: an unparsable bind address exits 2", async () => {
  const env = { ...NO_CLUSTER, OCI_REGISTRY: "127.0.0.1:5000/c" };
  assert.equal(await exitCode(["--metrics-bind-address=localhost"], env), 2);
  assert.equal(await exitCode([], { ...env, PROBE_ADDR: ":99999" }), 2);
});

Deno.test("main: a malformed OCI_REGISTRY exits 2", async () => {
  assert.equal(
    await exitCode([], { ...NO_CLUSTER, OCI_REGISTRY: "https://registry.example.com/x" }),
    2,
  );
});

Deno.test("main: --version and --help exit 0", async () => {
  const logs: string[] = [];
  const original = console.log;
  console.log = (...parts: unknown[]) => logs.push(parts.join(" "));
  try {
    assert.equal(await main(["--version"], NO_CLUSTER), 0);
    assert.equal(await main(["--help"], NO_CLUSTER), 0);
  } finally {
    console.log = original;
  }
  assert.match(logs[0], /^cocoon-operator \S+ \(rev=\S+, built \S+\)$/);
  assert.match(logs[1], /--cocoonset-concurrency/);
});

Deno.test("main: no cluster configured is one line naming what was tried, exit 2", async () => {
  const { code, errors } = await run(["--leader-elect=false"], {
    HOME: "/nonexistent",
    OCI_REGISTRY: "127.0.0.1:5000/c",
  });
  assert.equal(code, 2);
  assert.deepEqual(plainLines(errors), [
    "cocoon-operator: no Kubernetes cluster configured: tried KUBECONFIG (unset), " +
    "in-cluster (KUBERNETES_SERVICE_HOST unset), ~/.kube/config (/nonexistent/.kube/config " +
    "missing); for a local sandbox cluster run `deno task dev`",
  ]);
});

Deno.test("main: --kubeconfig naming no file is one line naming the flag, exit 2", async () => {
  const { code, errors } = await run(["--leader-elect=false", "--kubeconfig=/nonexistent/kc"], {
    KUBECONFIG: "/also/not/used",
    OCI_REGISTRY: "127.0.0.1:5000/c",
  });
  assert.equal(code, 2);
  assert.deepEqual(plainLines(errors), [
    "cocoon-operator: no Kubernetes cluster configured: --kubeconfig=/nonexistent/kc names no " +
    "existing file; for a local sandbox cluster run `deno task dev`",
  ]);
});

Deno.test("main: an API server that cannot be reached is one line, exit 2", async () => {
  // A port that was free a moment ago: nothing listens there.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const dir = await Deno.makeTempDir();
  try {
    const kubeconfig = `${dir}/config`;
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: `https://127.0.0.1:${port}` } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const env = { KUBECONFIG: kubeconfig, OCI_REGISTRY: "127.0.0.1:5000/c" };
    const { code, errors } = await run(["--leader-elect=false"], env);
    assert.equal(code, 2);
    const lines = plainLines(errors);
    assert.equal(lines.length, 1, errors.join("\n"));
    assert.match(
      lines[0],
      new RegExp(
        `^cocoon-operator: cannot reach the Kubernetes API server https://127.0.0.1:${port} ` +
          `\\(from KUBECONFIG=${kubeconfig}\\): .*refused.*; for a local sandbox cluster run ` +
          "`deno task dev`$",
      ),
    );
    // Out of cluster, leader election needs a namespace: said before anything is dialled.
    const noNs = await run([], env);
    assert.equal(noNs.code, 2);
    assert.match(plainLines(noNs.errors)[0], /leader election needs a namespace outside a cluster/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: a kubeconfig server that is no URL is one line, exit 2", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const kubeconfig = `${dir}/config`;
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        "current-context": "c",
        clusters: [{ name: "c", cluster: { server: "https://" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
      }),
    );
    const { code, errors } = await run(["--leader-elect=false"], {
      KUBECONFIG: kubeconfig,
      OCI_REGISTRY: "127.0.0.1:5000/c",
    });
    assert.equal(code, 2);
    assert.deepEqual(plainLines(errors), [
      'cocoon-operator: kubeconfig cluster c has server "https://", which is not an http(s) URL',
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main: prom-client loads with operator.ts, while the API server is asked, not before", async () => {
  // main.ts starts loading operator.ts before it connects; what the connect itself needs must
  // not wait for the metrics library (its requests are counted apart, kube/request_counts.ts).
  const prom = (graph: Set<string>) => [...graph].filter((s) => s.includes("prom-client"));
  const main = await staticImportClosure(new URL("./main.ts", import.meta.url).pathname);
  assert.deepEqual(prom(main), []);
  assert.ok(
    ![...main].some((s) => s.endsWith("/kube/metrics.ts")),
    "main.ts loads kube/metrics.ts",
  );
  const operator = await staticImportClosure(new URL("./operator.ts", import.meta.url).pathname);
  assert.ok(prom(operator).length > 0, "operator.ts loads prom-client");
});

Deno.test("main: the start-up graph leaves node:process to the first metrics scrape", async () => {
  // Deno builds its Node process object when node:process is imported: ~12 ms before the
  // workers start and ~1.5 MiB, for the CPU counter read at scrape time (kube/process_metrics.ts).
  for (const root of ["./main.ts", "./operator.ts"]) {
    const graph = await staticImportClosure(new URL(root, import.meta.url).pathname);
    assert.ok(graph.size > 20, `${root}: ${graph.size} modules`);
    assert.ok(!graph.has("node:process"), `${root} loads node:process statically`);
  }
});
