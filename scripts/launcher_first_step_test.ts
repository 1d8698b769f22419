import assert from "node:assert/strict";
import { resolve } from "node:path";
import {
  FIRST_STEP_ENV,
  FIRST_STEP_PROXY_VARIABLES,
  isAbsolutePath,
  loadReadPathDeps,
  readPaths,
  resolvePath,
} from "./launcher_first_step.ts";
import { launcherEnv, launcherReadPaths } from "./launch_plan.ts";
import { PROXY_VARIABLES } from "../permissions.ts";
import { staticImportClosure } from "../tests/harness/module_graph.ts";

Deno.test("launcher first step: its variable lists are the planning code's, in order", () => {
  assert.deepEqual(FIRST_STEP_ENV, launcherEnv);
  assert.deepEqual(FIRST_STEP_PROXY_VARIABLES, PROXY_VARIABLES);
});

Deno.test("launcher first step: paths resolve as node:path does", () => {
  const cwd = "/work/repo";
  for (
    const p of ["a", "a/b/", "./a", "../a", "a/../../b", "a//b", ".", "..", "/abs/x", "/a/../b"]
  ) {
    assert.equal(resolvePath(cwd, p), resolve(cwd, p), p);
  }
  assert.equal(isAbsolutePath("/x"), true);
  assert.equal(isAbsolutePath("x/y"), false);
});

Deno.test("launcher first step: the read paths it computes with lazily loaded parts are the planning code's", async () => {
  const cases: [string[], Record<string, string | undefined>, string][] = [
    [[], { HOME: "/home/dev/", KUBECONFIG: "a:/abs/b/::" }, "/work"],
    [["--kubeconfig=rel/k", "--leader-elect=false"], { HOME: "/h" }, "/work"],
    [["-kubeconfig", "../k"], {}, "/work/sub"],
    [["--kubeconfig"], { HOME: "/h" }, "/w"], // refused by parseConfig: no path from it
    [[], { KUBERNETES_SERVICE_HOST: "10.0.0.1" }, "/"],
    [[], { GOOGLE_APPLICATION_CREDENTIALS: "key.json", HOME: "/h" }, "/w"],
  ];
  for (const [args, env, cwd] of cases) {
    assert.deepEqual(
      readPaths(args, env, cwd, await loadReadPathDeps(args, env)),
      launcherReadPaths(args, env, cwd),
      JSON.stringify([args, env]),
    );
  }
});

Deno.test("launcher first step: scripts/start.ts loads no node: module and no npm package before its first step runs", async () => {
  // A node: import starts Deno's Node compatibility layer, an npm one the npm loader: ~50 ms of
  // CPU before every operator start. The first step imports start.ts's static graph only.
  const seen = await staticImportClosure(new URL("./start.ts", import.meta.url).pathname);
  const heavy = [...seen].filter((s) => s.startsWith("node:") || s.startsWith("npm:"));
  assert.deepEqual(heavy, []);
});
