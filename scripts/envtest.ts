/**
 * Builds the real control-plane binaries the integration tests run against (kube-apiserver,
 * kubectl, etcd) from their Go modules, into a per-version cache folder outside the repo.
 *
 * `deno task envtest` prints the folder holding the three binaries (and nothing else) on stdout;
 * progress goes to stderr. A second run with the binaries in place returns at once.
 *
 * Why a wrapper module: `go install pkg@version` refuses modules whose go.mod carries replace
 * directives, and k8s.io/kubernetes points every k8s.io staging module at a local folder. A
 * throw-away module that requires k8s.io/kubernetes and replaces each staging module with its
 * published v0.x twin builds the same sources.
 *
 * @module
 */
import { errorMessage } from "../kube/errors.ts";
import { rfc3339 } from "../kube/time.ts";

/**
 * Kubernetes releases the tests run against, by minor version, each with the etcd it is built
 * beside. 1.35 is the default control plane; 1.36 is built beside it for the features that first
 * ship there (server-side sharded list and watch, behind the alpha `ShardedListAndWatch` gate);
 * 1.33 and 1.37, the oldest and newest releases of the tested range, run the smoke suite
 * (tests/integration/kubernetes_versions_test.ts).
 *
 * etcd: the newest patch on the Go module proxy of the etcd minor the release pins in its go.mod
 * (1.33: 3.5, 1.35 and 1.36: 3.6, 1.37: 3.7), as a cluster of that release runs it.
 */
export const KUBERNETES_RELEASES = {
  "1.33": { kubernetes: "1.33.13", etcd: "3.5.36" },
  "1.35": { kubernetes: "1.35.4", etcd: "3.6.16" },
  "1.36": { kubernetes: "1.36.3", etcd: "3.6.16" },
  "1.37": { kubernetes: "1.37.2", etcd: "3.7.3" },
} as const;
/** A minor version the envtest task knows how to build. */
export type KubernetesMinor = keyof typeof KUBERNETES_RELEASES;
/** The minor version every test uses unless it asks for another. */
export const DEFAULT_KUBERNETES_MINOR: KubernetesMinor = "1.35";
/** Names of the binaries a usable bin folder must contain. */
const ENVTEST_BINARIES = ["etcd", "kube-apiserver", "kubectl"] as const;

/** Staging modules are tagged v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>. */
function stagingVersion(release: string): string {
  return `v0.${release.split(".").slice(1).join(".")}`;
}

/** Parses `1.36`, `v1.36` or `1.36.3` into a known minor version; throws on any other. */
export function parseKubernetesMinor(text: string): KubernetesMinor {
  const minor = text.replace(/^v/, "").split(".").slice(0, 2).join(".");
  if (minor in KUBERNETES_RELEASES) return minor as KubernetesMinor;
  throw new Error(
    `unknown Kubernetes version ${JSON.stringify(text)}; known: ${
      Object.keys(KUBERNETES_RELEASES).join(", ")
    }`,
  );
}

/** Where the binaries for one minor version live once built. */
export function envtestCacheDir(minor: KubernetesMinor = DEFAULT_KUBERNETES_MINOR): string {
  const home = Deno.env.get("HOME") ?? "/tmp";
  const cache = Deno.env.get("XDG_CACHE_HOME") || `${home}/.cache`;
  const { kubernetes, etcd } = KUBERNETES_RELEASES[minor];
  return `${cache}/cocoon-operator/envtest/k8s-${kubernetes}_etcd-${etcd}/bin`;
}

/**
 * The variable that may point at a ready folder for one minor version: `ENVTEST_BIN_DIR` for the
 * default, `ENVTEST_BIN_DIR_1_36` (and so on) for the others.
 */
export function envtestBinDirVariable(minor: KubernetesMinor = DEFAULT_KUBERNETES_MINOR): string {
  return minor === DEFAULT_KUBERNETES_MINOR
    ? "ENVTEST_BIN_DIR"
    : `ENVTEST_BIN_DIR_${minor.replace(".", "_")}`;
}

/**
 * Returns a folder holding etcd, kube-apiserver and kubectl of one minor version: the folder its
 * variable names when it has all three, else the version-keyed cache, building into it first
 * when it is missing.
 */
export async function envtestBinDir(
  minor: KubernetesMinor = DEFAULT_KUBERNETES_MINOR,
): Promise<string> {
  const found = await existingEnvtestBinDir(minor);
  if (found) return found;
  const dir = envtestCacheDir(minor);
  const { kubernetes, etcd } = KUBERNETES_RELEASES[minor];
  await buildInto(dir, kubernetes, etcd);
  return dir;
}

/**
 * The folder {@linkcode envtestBinDir} would return without building anything, or undefined
 * when a build is needed (callers announce that it takes minutes).
 */
export async function existingEnvtestBinDir(
  minor: KubernetesMinor = DEFAULT_KUBERNETES_MINOR,
): Promise<string | undefined> {
  const fromEnv = Deno.env.get(envtestBinDirVariable(minor));
  if (fromEnv && await hasAllBinaries(fromEnv)) return fromEnv;
  const dir = envtestCacheDir(minor);
  return await hasAllBinaries(dir) ? dir : undefined;
}

async function hasAllBinaries(dir: string): Promise<boolean> {
  for (const name of ENVTEST_BINARIES) {
    try {
      const info = await Deno.stat(`${dir}/${name}`);
      if (!info.isFile || ((info.mode ?? 0o755) & 0o111) === 0) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function progress(message: string): void {
  console.error(`[envtest] ${message}`);
}

/** Children still running, so an interrupted build can stop them too. */
const runningChildren = new Set<Deno.ChildProcess>();

/** Runs a command, streaming its stderr to ours; returns stdout. Throws on a non-zero exit. */
async function run(
  args: string[],
  opts: { cwd: string; env?: Record<string, string> },
): Promise<string> {
  const child = new Deno.Command(args[0], {
    args: args.slice(1),
    cwd: opts.cwd,
    env: opts.env,
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  runningChildren.add(child);
  const out = await child.output().finally(() => runningChildren.delete(child));
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${args.join(" ")} exited with ${out.code}\n${stdout.slice(-4000)}`);
  }
  return stdout;
}

/** The go.mod of one module version, fetched through the Go module cache. */
async function downloadGoMod(module: string, version: string, cwd: string): Promise<string> {
  const json = await run(["go", "mod", "download", "-json", `${module}@${version}`], { cwd });
  const info: unknown = JSON.parse(json);
  if (typeof info !== "object" || info === null || !("GoMod" in info)) {
    throw new Error(`go mod download ${module}@${version}: no GoMod in ${json}`);
  }
  const path = (info as { GoMod: unknown }).GoMod;
  if (typeof path !== "string") throw new Error(`go mod download ${module}: bad GoMod`);
  return await Deno.readTextFile(path);
}

/**
 * The lines of a dependency's go.mod a wrapper must repeat to build like upstream: the `go`
 * language version and any `godebug` defaults (only the main module's count).
 */
function languageLines(goMod: string): string[] {
  const lines: string[] = [];
  for (const line of goMod.split("\n")) {
    if (/^go\s+\S+\s*$/.test(line) || /^godebug\s/.test(line)) lines.push(line.trim());
  }
  return lines;
}

/** Module paths that a go.mod redirects into a local folder (the k8s.io staging tree). */
function localReplacements(goMod: string): string[] {
  const found = new Set<string>();
  for (const match of goMod.matchAll(/^\s*(?:replace\s+)?(\S+)\s*=>\s*\.\.?\//gm)) {
    found.add(match[1]);
  }
  return [...found].sort();
}

interface WrapperSpec {
  name: string;
  module: string;
  version: string;
  replace: Record<string, string>;
  languageFrom: string;
  /** `-X` linker settings, e.g. the version strings upstream's release build stamps in. */
  stamp: Record<string, string>;
  /** Binary name to the main package that builds it. */
  binaries: Record<string, string>;
}

/** Writes a throw-away module requiring `spec.module`, tidies it and builds `spec.packages`. */
async function buildWrapper(spec: WrapperSpec, work: string, outDir: string): Promise<void> {
  const dir = `${work}/${spec.name}`;
  await Deno.mkdir(dir, { recursive: true });
  const replaces = Object.entries(spec.replace).map(([m, v]) => `\t${m} => ${m} ${v}`);
  const goMod = [
    `module envtest.local/${spec.name}`,
    "",
    ...languageLines(spec.languageFrom),
    "",
    `require ${spec.module} ${spec.version}`,
    "",
    ...(replaces.length ? ["replace (", ...replaces, ")", ""] : []),
  ].join("\n");
  await Deno.writeTextFile(`${dir}/go.mod`, goMod);
  // A tools file pins the command packages so `go mod tidy` records every module they need.
  const packages = Object.values(spec.binaries);
  const imports = packages.map((p) => `\t_ "${p}"`).join("\n");
  await Deno.writeTextFile(
    `${dir}/tools.go`,
    `//go:build tools\n\npackage tools\n\nimport (\n${imports}\n)\n`,
  );
  progress(`${spec.name}: resolving modules`);
  await run(["go", "mod", "tidy"], { cwd: dir });
  const ldflags = ["-s", "-w", ...Object.entries(spec.stamp).map(([k, v]) => `-X ${k}=${v}`)];
  for (const [binary, pkg] of Object.entries(spec.binaries)) {
    progress(`${spec.name}: building ${binary} from ${pkg}`);
    await run(
      [
        "go",
        "build",
        "-trimpath",
        `-ldflags=${ldflags.join(" ")}`,
        "-o",
        `${outDir}/${binary}`,
        pkg,
      ],
      { cwd: dir, env: { CGO_ENABLED: "0" } },
    );
  }
}

/**
 * Version variables Kubernetes' own build sets with `-X`; without them the binaries report
 * v0.0.0-master, and clients that look at /version would see a bogus server version.
 */
function kubernetesVersionStamp(release: string): Record<string, string> {
  const [major, minor] = release.split(".");
  const values: Record<string, string> = {
    gitVersion: `v${release}`,
    gitMajor: major,
    gitMinor: minor,
    gitTreeState: "clean",
    buildDate: rfc3339(Date.now()),
  };
  const stamp: Record<string, string> = {};
  for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
    for (const [name, value] of Object.entries(values)) stamp[`${pkg}.${name}`] = value;
  }
  return stamp;
}

/** Builds all binaries into a scratch folder beside `dir`, then renames it into place. */
async function buildInto(dir: string, release: string, etcdVersion: string): Promise<void> {
  const parent = dir.slice(0, dir.lastIndexOf("/"));
  const root = parent.slice(0, parent.lastIndexOf("/"));
  await Deno.mkdir(root, { recursive: true });
  // Same filesystem as the target, so the final rename is atomic.
  await removeStaleScratch(root);
  const scratch = await Deno.makeTempDir({ dir: root, prefix: ".build-" });
  const started = Date.now();
  // An interrupted build must not leave its scratch tree behind.
  const onSignal = () => {
    for (const child of runningChildren) {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already exited.
      }
    }
    try {
      Deno.removeSync(scratch, { recursive: true });
    } finally {
      Deno.exit(130);
    }
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const sig of signals) Deno.addSignalListener(sig, onSignal);
  try {
    const work = `${scratch}/src`;
    const out = `${scratch}/bin`;
    await Deno.mkdir(work, { recursive: true });
    await Deno.mkdir(out, { recursive: true });

    progress(`fetching k8s.io/kubernetes v${release} go.mod`);
    const k8sMod = await downloadGoMod("k8s.io/kubernetes", `v${release}`, work);
    const staging = localReplacements(k8sMod).filter((m) => m.startsWith("k8s.io/"));
    if (staging.length === 0) throw new Error("k8s.io/kubernetes go.mod has no staging replaces");
    const etcdMod = await downloadGoMod("go.etcd.io/etcd/server/v3", `v${etcdVersion}`, work);

    await buildWrapper(
      {
        name: "etcd",
        module: "go.etcd.io/etcd/server/v3",
        version: `v${etcdVersion}`,
        replace: {},
        languageFrom: etcdMod,
        // The etcd server module's root package is the `etcd` main program.
        stamp: {},
        binaries: { etcd: "go.etcd.io/etcd/server/v3" },
      },
      work,
      out,
    );

    await buildWrapper(
      {
        name: "kubernetes",
        module: "k8s.io/kubernetes",
        version: `v${release}`,
        replace: Object.fromEntries(staging.map((m) => [m, stagingVersion(release)])),
        languageFrom: k8sMod,
        stamp: kubernetesVersionStamp(release),
        binaries: {
          "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
          kubectl: "k8s.io/kubernetes/cmd/kubectl",
        },
      },
      work,
      out,
    );

    if (!(await hasAllBinaries(out))) {
      throw new Error(`build finished without all of ${ENVTEST_BINARIES}`);
    }
    await Deno.mkdir(parent, { recursive: true });
    try {
      await Deno.rename(out, dir);
    } catch (err) {
      // Another build won the race; its result is as good as ours.
      if (!(await hasAllBinaries(dir))) throw err;
    }
    progress(`built in ${Math.round((Date.now() - started) / 1000)} s`);
  } finally {
    for (const sig of signals) Deno.removeSignalListener(sig, onSignal);
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}

/** Removes scratch trees of builds that died without cleaning up (older than a day). */
async function removeStaleScratch(root: string): Promise<void> {
  const cutoff = Date.now() - 24 * 3600_000;
  for await (const entry of Deno.readDir(root)) {
    if (!entry.isDirectory || !entry.name.startsWith(".build-")) continue;
    const path = `${root}/${entry.name}`;
    const info = await Deno.stat(path).catch(() => undefined);
    if (info?.mtime && info.mtime.getTime() < cutoff) {
      await Deno.remove(path, { recursive: true }).catch(() => {});
    }
  }
}

if (import.meta.main) {
  try {
    // `deno task envtest` builds the default version; `deno task envtest 1.36` another one.
    const minor = Deno.args[0] ? parseKubernetesMinor(Deno.args[0]) : DEFAULT_KUBERNETES_MINOR;
    console.log(await envtestBinDir(minor));
  } catch (err) {
    console.error(`[envtest] ${errorMessage(err)}`);
    Deno.exit(1);
  }
}
