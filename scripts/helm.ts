/**
 * Builds the Helm client the chart tests and CI use (charts/cocoon-operator) from its Go module,
 * once, into a version-keyed cache folder outside the repo, as scripts/envtest.ts does for the
 * control plane.
 *
 * `deno task helm` prints the path of the binary (and nothing else) on stdout; progress goes to
 * stderr. A second run with the binary in place returns at once.
 *
 * Helm 4 rather than 3: Helm 3 takes only security fixes since its last feature release
 * (2026-09-09) and none after 2027-02-10, so a chart tested today is tested with the line its
 * users move to. The chart (apiVersion v2) installs with Helm 3 too.
 *
 * @module
 */
import { errorMessage } from "../kube/errors.ts";

/** The Helm release the tests run. */
export const HELM_VERSION = "v4.3.1";
/** The Go module that holds it; its go.mod has no replace directives, so `go install` builds it. */
const HELM_MODULE = "helm.sh/helm/v4";

/** Where the binary lives once built. */
export function helmCachePath(): string {
  const home = Deno.env.get("HOME") ?? "/tmp";
  const cache = Deno.env.get("XDG_CACHE_HOME") || `${home}/.cache`;
  return `${cache}/cocoon-operator/helm/${HELM_VERSION}/bin/helm`;
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    const info = await Deno.stat(path);
    return info.isFile && ((info.mode ?? 0o755) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * The Helm binary without building anything: `HELM_BIN` when it names an executable, else the
 * cache's; undefined when neither exists (a build takes a few minutes).
 */
export async function existingHelm(): Promise<string | undefined> {
  const fromEnv = Deno.env.get("HELM_BIN");
  if (fromEnv && await isExecutable(fromEnv)) return fromEnv;
  const cached = helmCachePath();
  return await isExecutable(cached) ? cached : undefined;
}

/** Returns a Helm binary, building it into the cache first when there is none. */
export async function helmBinary(): Promise<string> {
  const found = await existingHelm();
  if (found) return found;
  const path = helmCachePath();
  await buildInto(path);
  return path;
}

/**
 * The `-X` settings Helm's own release build stamps (its Makefile), so `helm version` and the
 * chart's `.Capabilities.HelmVersion` name the release rather than the bare minor.
 */
function versionStamp(): string[] {
  const pkg = `${HELM_MODULE}/internal/version`;
  return [`-X ${pkg}.version=${HELM_VERSION}`, `-X ${pkg}.gitTreeState=clean`];
}

/** `go install` into a scratch folder beside the cache, then renames the binary into place. */
async function buildInto(path: string): Promise<void> {
  const binDir = path.slice(0, path.lastIndexOf("/"));
  const versionDir = binDir.slice(0, binDir.lastIndexOf("/"));
  await Deno.mkdir(versionDir, { recursive: true });
  const scratch = await Deno.makeTempDir({ dir: versionDir, prefix: ".build-" });
  const started = Date.now();
  console.error(`[helm] building ${HELM_MODULE}/cmd/helm@${HELM_VERSION} (a few minutes, once)`);
  try {
    const out = await new Deno.Command("go", {
      args: [
        "install",
        "-trimpath",
        `-ldflags=-s -w ${versionStamp().join(" ")}`,
        `${HELM_MODULE}/cmd/helm@${HELM_VERSION}`,
      ],
      cwd: scratch,
      env: { GOBIN: scratch, CGO_ENABLED: "0", GOFLAGS: "-mod=mod" },
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`go install exited with ${out.code}`);
    await Deno.mkdir(binDir, { recursive: true });
    try {
      await Deno.rename(`${scratch}/helm`, path);
    } catch (err) {
      // Another build won the race; its result is as good as ours.
      if (!(await isExecutable(path))) throw err;
    }
    console.error(`[helm] built in ${Math.round((Date.now() - started) / 1000)} s: ${path}`);
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  try {
    console.log(await helmBinary());
  } catch (err) {
    console.error(`[helm] ${errorMessage(err)}`);
    Deno.exit(1);
  }
}
