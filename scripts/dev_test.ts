import assert from "node:assert/strict";
import {
  DevUsageError,
  localStackBlocker,
  parseDevFlags,
  readyBanner,
  SIM_NODES,
  taskArgs,
} from "./dev.ts";

const repoRoot = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("dev flags: defaults to .dev in the repository, relative --dir against cwd", () => {
  assert.deepEqual(parseDevFlags([], "/elsewhere"), {
    dir: `${repoRoot}/.dev`,
    local: false,
    help: false,
  });
  assert.deepEqual(parseDevFlags(["--dir", "state", "--local"], "/work"), {
    dir: "/work/state",
    local: true,
    help: false,
  });
  assert.throws(() => parseDevFlags(["--bogus"], "/"), DevUsageError);
  assert.throws(() => parseDevFlags(["stray"], "/"), DevUsageError);
});

Deno.test("dev: the sim and start tasks are plain deno run commands whose flags carry over", async () => {
  const tasks = JSON.parse(await Deno.readTextFile(`${repoRoot}/deno.json`)).tasks;
  const sim = taskArgs(tasks, "sim");
  assert.equal(sim[0], "run");
  assert.equal(sim.at(-1), "sim/main.ts");
  assert.deepEqual(sim.slice(1, -1), tasks.sim.split(" ").slice(2, -1));
  const start = taskArgs(tasks, "start");
  assert.equal(start.at(-1), "scripts/start.ts");
  assert.ok(start.includes("--allow-run=deno"));
  assert.ok(!start.includes("-A") && !start.includes("--allow-all"));
});

Deno.test("dev: a task that is not a plain deno run is refused rather than run by a shell", () => {
  assert.throws(() => taskArgs({ x: "deno run a.ts && rm -rf /" }, "x"), /not a plain/);
  assert.throws(() => taskArgs({ x: "node a.js" }, "x"), /not a plain/);
  assert.throws(() => taskArgs({}, "x"), /no task x/);
});

Deno.test("dev: the banner names the kubeconfig and commands that use files that exist", async () => {
  const banner = readyBanner({
    kubeconfig: "/r/.dev/kubeconfig",
    server: "https://127.0.0.1:6443",
    registry: "127.0.0.1:5000/cocoon",
    nodes: ["cocoon-sim-0", "cocoon-sim-1", "cocoon-sim-2"],
    metricsUrl: "http://127.0.0.1:8080",
    cwd: repoRoot,
  });
  const lines = banner.split("\n");
  assert.ok(lines.includes("kubeconfig: /r/.dev/kubeconfig"));
  assert.ok(lines.includes("  export KUBECONFIG=/r/.dev/kubeconfig"));
  assert.ok(lines.includes("  kubectl apply -f examples/cocoonset-basic.yaml"));
  assert.ok(lines.includes("  kubectl get pods -w"));
  assert.ok(lines.some((l) => l.startsWith("  kubectl get cs.cocoonset.cocoonstack.io")));
  assert.ok(!lines.some((l) => l.startsWith("  alias kubectl")), "kubectl on PATH: no alias");
  for (const match of banner.matchAll(/apply -f (\S+)/g)) {
    assert.ok((await Deno.stat(`${repoRoot}/${match[1]}`)).isFile, match[1]);
  }
  assert.match(banner, /http:\/\/127\.0\.0\.1:8080\/metrics/);
  assert.match(banner, new RegExp(`${SIM_NODES.seats} seats each`));
});

Deno.test("dev: the banner uses absolute example paths outside the repo, and the envtest kubectl", () => {
  const banner = readyBanner({
    kubeconfig: "/k",
    server: "https://127.0.0.1:6443",
    registry: "r",
    nodes: [],
    kubectl: "/cache/bin/kubectl",
    cwd: "/somewhere/else",
  });
  assert.match(banner, new RegExp(`kubectl apply -f ${repoRoot}/examples/cocoonset-basic.yaml`));
  assert.match(banner, /^ {2}alias kubectl=\/cache\/bin\/kubectl$/m);
});

Deno.test("dev: a missing registry binary says how to install it; nothing else blocks", () => {
  const registry = localStackBlocker({
    registryInstalled: false,
    binariesBuilt: true,
    goOnPath: true,
  });
  assert.match(registry ?? "", /sudo apt-get install docker-registry/);
  const go = localStackBlocker({ registryInstalled: true, binariesBuilt: false, goOnPath: false });
  assert.match(go ?? "", /needs Go/);
  assert.equal(
    localStackBlocker({ registryInstalled: true, binariesBuilt: false, goOnPath: true }),
    undefined,
    "a build with Go is fine",
  );
  assert.equal(
    localStackBlocker({ registryInstalled: true, binariesBuilt: true, goOnPath: false }),
    undefined,
    "built binaries need no Go",
  );
});
