/**
 * Helm for the chart tests: the binary `deno task helm` builds into its cache (scripts/helm.ts),
 * run with its own configuration, cache and data folders (no repository list or plugin of the
 * machine's user leaks in, and nothing is written to the user's).
 *
 * A machine without the binary skips the chart tests, naming `deno task helm` in the test name;
 * with CI set they fail instead, as the promtool tests do.
 *
 * @module
 */
import { existingHelm, HELM_VERSION } from "../../scripts/helm.ts";
import { repoRoot } from "./kustomize.ts";

/** The chart folder. */
export const CHART_DIR = `${repoRoot}charts/cocoon-operator`;

const helmPath = await existingHelm();
const inCi = Boolean(Deno.env.get("CI"));

/** Appended to a chart test's name: why it is skipped, or nothing. */
export const helmSkipReason = helmPath || inCi
  ? ""
  : ` (skipped: no helm ${HELM_VERSION}; run \`deno task helm\`)`;

/** Whether the chart tests are skipped on this machine. */
export const helmMissing = helmSkipReason !== "";

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

let homes: string | undefined;
globalThis.addEventListener("unload", () => {
  if (homes) Deno.removeSync(homes, { recursive: true });
});

/** Runs helm; `kubeconfig` points it at a cluster. Never throws on a non-zero exit. */
export async function helm(
  args: string[],
  opts: { kubeconfig?: string; stdin?: string } = {},
): Promise<HelmResult> {
  if (!helmPath) {
    throw new Error(`helm ${HELM_VERSION} is not built: run \`deno task helm\` (CI builds it)`);
  }
  homes ??= await Deno.makeTempDir({ prefix: "helm-home-" });
  const child = new Deno.Command(helmPath, {
    args,
    clearEnv: true,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: homes,
      HELM_CACHE_HOME: `${homes}/cache`,
      HELM_CONFIG_HOME: `${homes}/config`,
      HELM_DATA_HOME: `${homes}/data`,
      KUBECONFIG: opts.kubeconfig ?? `${homes}/no-cluster`,
    },
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs helm and fails with its output unless it exits 0; returns stdout. */
export async function helmOk(
  args: string[],
  opts: { kubeconfig?: string; stdin?: string } = {},
): Promise<string> {
  const r = await helm(args, opts);
  if (r.code !== 0) throw new Error(`helm ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}
