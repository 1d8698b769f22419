import assert from "node:assert/strict";
import {
  DEFAULT_KUBERNETES_MINOR,
  envtestBinDirVariable,
  envtestCacheDir,
  KUBERNETES_RELEASES,
  parseKubernetesMinor,
} from "./envtest.ts";

Deno.test("envtest: a version argument names a known minor release", () => {
  assert.equal(parseKubernetesMinor("1.36"), "1.36");
  assert.equal(parseKubernetesMinor("v1.36"), "1.36");
  assert.equal(parseKubernetesMinor("1.35.4"), "1.35");
  assert.throws(() => parseKubernetesMinor("1.20"), /unknown Kubernetes version "1.20"/);
});

Deno.test("envtest: each minor version has its own cache folder and variable", () => {
  assert.equal(DEFAULT_KUBERNETES_MINOR, "1.35");
  assert.notEqual(envtestCacheDir("1.35"), envtestCacheDir("1.36"));
  assert.match(envtestCacheDir("1.36"), /\/k8s-1\.36\.3_etcd-3\.6\.16\/bin$/);
  assert.equal(envtestBinDirVariable("1.35"), "ENVTEST_BIN_DIR");
  assert.equal(envtestBinDirVariable("1.36"), "ENVTEST_BIN_DIR_1_36");
  assert.equal(envtestBinDirVariable("1.33"), "ENVTEST_BIN_DIR_1_33");
  assert.equal(envtestBinDirVariable("1.37"), "ENVTEST_BIN_DIR_1_37");
});

Deno.test("envtest: the tested range's ends, each with the etcd minor its release pins", () => {
  assert.deepEqual(Object.keys(KUBERNETES_RELEASES).sort(), ["1.33", "1.35", "1.36", "1.37"]);
  assert.equal(parseKubernetesMinor("v1.33.13"), "1.33");
  assert.equal(parseKubernetesMinor("1.37"), "1.37");
  assert.match(envtestCacheDir("1.33"), /\/k8s-1\.33\.13_etcd-3\.5\.\d+\/bin$/);
  assert.match(envtestCacheDir("1.37"), /\/k8s-1\.37\.2_etcd-3\.7\.\d+\/bin$/);
  // The default release's folder (what CI and every developer already built) stays where it is.
  assert.match(envtestCacheDir("1.35"), /\/k8s-1\.35\.4_etcd-3\.6\.16\/bin$/);
});

Deno.test("envtest: .ci/run builds every release and exports the variable the tests read", async () => {
  const ci = await Deno.readTextFile(new URL("../.ci/run", import.meta.url));
  for (const minor of Object.keys(KUBERNETES_RELEASES) as (keyof typeof KUBERNETES_RELEASES)[]) {
    const variable = envtestBinDirVariable(minor);
    assert.match(ci, new RegExp(`export_envtest_dir ${variable} `), variable);
    if (minor !== DEFAULT_KUBERNETES_MINOR) {
      assert.match(ci, new RegExp(`envtest_dir ${minor.replace(".", "\\.")}\\b`), minor);
    }
  }
});
