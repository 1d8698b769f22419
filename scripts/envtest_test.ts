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
  assert.match(envtestCacheDir("1.36"), new RegExp(`k8s-${KUBERNETES_RELEASES["1.36"]}_etcd-`));
  assert.equal(envtestBinDirVariable("1.35"), "ENVTEST_BIN_DIR");
  assert.equal(envtestBinDirVariable("1.36"), "ENVTEST_BIN_DIR_1_36");
});
