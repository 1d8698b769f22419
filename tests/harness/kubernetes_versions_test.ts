import assert from "node:assert/strict";
import { releaseAvailability } from "./kubernetes_versions.ts";

/** Runs fn with these variables set (undefined: unset), restoring them afterwards. */
async function withEnv(vars: Record<string, string | undefined>, fn: () => Promise<void>) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) Deno.env.delete(k);
      else Deno.env.set(k, v);
    }
  };
  apply(vars);
  try {
    await fn();
  } finally {
    apply(saved);
  }
}

Deno.test("kubernetes versions: a release without binaries is skipped, saying how, and fails under CI", async () => {
  const cache = await Deno.makeTempDir();
  const bin = await Deno.makeTempDir();
  try {
    const none = { XDG_CACHE_HOME: cache, ENVTEST_BIN_DIR_1_37: undefined };
    await withEnv({ ...none, CI: undefined }, async () => {
      const a = await releaseAvailability("1.37");
      assert.equal(a.ignore, true);
      assert.equal(a.missing, undefined);
      assert.match(
        a.nameSuffix,
        /^ \(skipped: no Kubernetes 1\.37 binaries; .*deno task envtest 1\.37.*ENVTEST_BIN_DIR_1_37/,
      );
    });
    await withEnv({ ...none, CI: "true" }, async () => {
      const a = await releaseAvailability("1.37");
      assert.equal(a.ignore, false);
      assert.equal(a.nameSuffix, "");
      assert.match(a.missing ?? "", /^no Kubernetes 1\.37 binaries \(ENVTEST_BIN_DIR_1_37 unset/);
    });
    // A folder with all three binaries, named by the variable: the test runs.
    for (const name of ["etcd", "kube-apiserver", "kubectl"]) {
      await Deno.writeTextFile(`${bin}/${name}`, "#!/bin/sh\n", { mode: 0o755 });
    }
    await withEnv({ ...none, CI: "true", ENVTEST_BIN_DIR_1_37: bin }, async () => {
      assert.deepEqual(await releaseAvailability("1.37"), { nameSuffix: "", ignore: false });
    });
  } finally {
    await Deno.remove(cache, { recursive: true });
    await Deno.remove(bin, { recursive: true });
  }
});
