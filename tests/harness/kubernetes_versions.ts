/**
 * Tests on a Kubernetes release other than the default one, whose binaries a developer may not
 * have built (`deno task envtest 1.33`, or ENVTEST_BIN_DIR_1_33 naming a folder): without them
 * such a test is skipped, its name saying how to get them, and never builds them behind the
 * developer's back (a build takes minutes). Under CI (`CI` set) a missing folder fails the test
 * instead, since .ci/run builds every release before the suite runs.
 *
 * @module
 */
import {
  envtestBinDirVariable,
  envtestCacheDir,
  existingEnvtestBinDir,
  type KubernetesMinor,
} from "../../scripts/envtest.ts";

/** How a test on `minor` is declared here: run, skipped (with the reason) or failed at once. */
export interface ReleaseAvailability {
  /** Appended to the test's name: "" when it runs, " (skipped: …)" when not. */
  nameSuffix: string;
  ignore: boolean;
  /** Under CI without the binaries: the error the test fails with, before starting anything. */
  missing?: string;
}

/** Looks for `minor`'s binaries without building them. */
export async function releaseAvailability(minor: KubernetesMinor): Promise<ReleaseAvailability> {
  if (await existingEnvtestBinDir(minor)) return { nameSuffix: "", ignore: false };
  const variable = envtestBinDirVariable(minor);
  const how = `build them with \`deno task envtest ${minor}\` or point ${variable} at a folder ` +
    "holding etcd, kube-apiserver and kubectl";
  if (Deno.env.get("CI")) {
    return {
      nameSuffix: "",
      ignore: false,
      missing: `no Kubernetes ${minor} binaries (${variable} unset or incomplete, nothing in ` +
        `${envtestCacheDir(minor)}): ${how}`,
    };
  }
  return { nameSuffix: ` (skipped: no Kubernetes ${minor} binaries; ${how})`, ignore: true };
}
