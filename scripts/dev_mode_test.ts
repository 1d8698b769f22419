import assert from "node:assert/strict";
import { chooseDevMode } from "./dev_mode.ts";
import type { FileProbe } from "../kube/kubeconfig.ts";

const OWN = "/repo/.dev/kubeconfig";

/** A file system holding exactly `present`. */
function files(...present: string[]): FileProbe {
  return (path) => present.includes(path) ? "present" : "missing";
}

function env(vars: Record<string, string>): (name: string) => string | undefined {
  return (name) => vars[name];
}

Deno.test("dev mode: nothing configured starts the local stack", () => {
  const mode = chooseDevMode(env({ HOME: "/home/u" }), OWN, "/repo", files());
  assert.deepEqual(mode, { kind: "local" });
});

Deno.test("dev mode: an empty KUBECONFIG counts as unset", () => {
  const mode = chooseDevMode(env({ HOME: "/home/u", KUBECONFIG: "" }), OWN, "/repo", files());
  assert.deepEqual(mode, { kind: "local" });
});

Deno.test("dev mode: an existing KUBECONFIG runs the operator against that cluster", () => {
  const mode = chooseDevMode(
    env({ HOME: "/home/u", KUBECONFIG: "/etc/kc" }),
    OWN,
    "/repo",
    files("/etc/kc"),
  );
  assert.deepEqual(mode, {
    kind: "cluster",
    source: { kind: "kubeconfig", origin: "KUBECONFIG", paths: ["/etc/kc"] },
  });
});

Deno.test("dev mode: ~/.kube/config alone is a configured cluster", () => {
  const mode = chooseDevMode(
    env({ HOME: "/home/u" }),
    OWN,
    "/repo",
    files("/home/u/.kube/config"),
  );
  assert.equal(mode.kind, "cluster");
  assert.ok(mode.kind === "cluster" && mode.source.kind === "kubeconfig");
  assert.equal(mode.source.origin, "~/.kube/config");
});

Deno.test("dev mode: a service-account token in a pod is a configured cluster", () => {
  const mode = chooseDevMode(
    env({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }),
    OWN,
    "/repo",
    files("/var/run/secrets/kubernetes.io/serviceaccount/token"),
  );
  assert.ok(mode.kind === "cluster");
  assert.equal(mode.source.kind, "in-cluster");
});

Deno.test("dev mode: KUBECONFIG naming this task's own kubeconfig starts a fresh local stack", () => {
  // Relative to the working directory, and present from an earlier run: still ours.
  const mode = chooseDevMode(
    env({ HOME: "/home/u", KUBECONFIG: ".dev/kubeconfig" }),
    OWN,
    "/repo",
    files(OWN, "/home/u/.kube/config"),
  );
  assert.equal(mode.kind, "local");
  assert.ok(mode.kind === "local" && mode.note?.includes(OWN));
});

Deno.test("dev mode: own kubeconfig listed next to another file is a configured cluster", () => {
  const mode = chooseDevMode(
    env({ KUBECONFIG: `${OWN}:/etc/kc` }),
    OWN,
    "/repo",
    files("/etc/kc"),
  );
  assert.equal(mode.kind, "cluster");
});

Deno.test("dev mode: a KUBECONFIG naming no file is refused with one line, not ignored", () => {
  const mode = chooseDevMode(
    env({ HOME: "/home/u", KUBECONFIG: "/nope" }),
    OWN,
    "/repo",
    files("/home/u/.kube/config"),
  );
  assert.equal(mode.kind, "refuse");
  assert.ok(mode.kind === "refuse");
  assert.match(mode.message, /^KUBECONFIG=\/nope names no readable file; .*unset KUBECONFIG/);
  assert.ok(!mode.message.includes("\n"));
});
