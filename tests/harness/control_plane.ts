/**
 * A real, throw-away Kubernetes control plane for integration tests: etcd plus kube-apiserver on
 * loopback, RBAC on, certificates and service-account keys generated per run, CRDs installed.
 *
 * Deliberate differences from a full cluster, which tests must keep in mind:
 * - No kube-controller-manager, scheduler or kubelet. Pods stay Pending with no node; namespaces
 *   that are deleted stay Terminating forever (the namespace controller finalizes them); garbage
 *   collection of owned objects never runs (ownerReferences are stored but nothing cascades);
 *   no `kube-root-ca.crt` ConfigMaps and no ServiceAccount token Secrets are created.
 * - The `ServiceAccount` admission plugin is disabled. It rejects pods whose service account
 *   (`default` unless set) does not exist, and only the controller-manager creates `default`
 *   accounts; with it off, pods are creatable in any namespace and get no token volume.
 * - The apiserver's watch cache is off unless `watchCache: true` (see that option): reads and
 *   watches go to etcd, so `compactEtcd` turns old resourceVersions into 410 Gone.
 * - etcd speaks plain HTTP on loopback (no TLS) so `compactEtcd` can use its JSON gateway, and
 *   runs without fsync (the data is thrown away).
 * - One CA signs the serving certificate and the client certificates.
 * - Cleanup: `stop()` in a `finally`; an unload handler and a watchdog shell (which notices when
 *   this process is gone, even after SIGKILL) kill leftovers and remove the temp dir.
 *
 * @module
 */

import { envtestBinDir } from "../../scripts/envtest.ts";
import { createCertificateAuthority, generateKeyPair } from "./certs.ts";
import { freePort, waitUntil } from "./wait.ts";

/** Options for {@linkcode startControlPlane}. */
export interface ControlPlaneOptions {
  /**
   * Folder of CRD manifests to install before returning. Default: `config/crd/bases` when it
   * holds `*.yaml`, else `../shared/reference/crds`. An empty string installs none.
   */
  crdDir?: string;
  /**
   * Run kube-apiserver with its watch cache (default false). With the cache on, watches and
   * exact-version lists are served from apiserver memory and never notice an etcd compaction,
   * so `compactEtcd` could not produce 410 Gone; with it off every read goes to etcd. The cost:
   * no BOOKMARK events and no `sendInitialEvents` watch-list streams.
   */
  watchCache?: boolean;
}

/** Result of a kubectl run. */
export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A running test control plane. */
export interface ControlPlane {
  /** `https://127.0.0.1:<port>` */
  readonly server: string;
  /** Admin kubeconfig (client certificate in group system:masters) inside the temp dir. */
  readonly kubeconfigPath: string;
  readonly binDir: string;
  readonly dataDir: string;
  /** PEM of the CA that signed the serving and client certificates. */
  readonly caCertPem: string;
  /** PEM client certificate and key of the admin user (for `Deno.createHttpClient`). */
  readonly adminCertPem: string;
  readonly adminKeyPem: string;
  /** `http://127.0.0.1:<port>` of etcd's client endpoint. */
  readonly etcdUrl: string;
  kubectl(
    args: string[],
    opts?: { stdin?: string; kubeconfig?: string },
  ): Promise<KubectlResult>;
  /** Creates namespace + ServiceAccount if needed and writes a token kubeconfig for it. */
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
  stopApiServer(): Promise<void>;
  /** Same etcd, port and certificates; waits for /readyz. */
  startApiServer(): Promise<void>;
  restartApiServer(): Promise<void>;
  /** Compacts etcd to its current revision so older resourceVersions answer 410 Gone. */
  compactEtcd(): Promise<void>;
  /** `kubectl apply` every manifest in `dir` and wait until each CRD is Established. */
  installCrds(dir: string): Promise<void>;
  /** Idempotent: kills both servers and removes the temp dir. */
  stop(): Promise<void>;
}

const REPO_ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** Cleanups for planes still running, run synchronously if the process exits without stop(). */
const liveCleanups = new Set<() => void>();
globalThis.addEventListener("unload", () => {
  for (const cleanup of liveCleanups) cleanup();
});

async function hasYaml(dir: string): Promise<boolean> {
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isFile && /\.ya?ml$/.test(entry.name)) return true;
    }
  } catch {
    return false;
  }
  return false;
}

async function defaultCrdDir(): Promise<string> {
  const own = `${REPO_ROOT}/config/crd/bases`;
  return await hasYaml(own) ? own : `${REPO_ROOT}/../shared/reference/crds`;
}

/** A server process whose stdout and stderr go straight to a log file (no pipes to drain). */
interface ServerProcess {
  child: Deno.ChildProcess;
  status: Promise<Deno.CommandStatus>;
  exited: boolean;
  logFile: string;
  pidFile: string;
}

/** Starts `binary`, logging to `<dataDir>/<name>.log` and recording its pid for the watchdog. */
function spawnServer(name: string, binary: string, args: string[], dataDir: string): ServerProcess {
  const logFile = `${dataDir}/${name}.log`;
  const pidFile = `${dataDir}/${name}.pid`;
  // `exec` keeps the pid the server's own, so signals reach it directly.
  const child = new Deno.Command("sh", {
    args: ["-c", 'exec "$0" "$@" >>"$ENVTEST_SERVER_LOG" 2>&1', binary, ...args],
    env: { ENVTEST_SERVER_LOG: logFile },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  Deno.writeTextFileSync(pidFile, String(child.pid));
  // A script that forgets stop() may still exit; the unload handler then kills the servers.
  child.unref();
  const server: ServerProcess = { child, status: child.status, exited: false, logFile, pidFile };
  server.status = child.status.finally(() => {
    server.exited = true;
    try {
      Deno.removeSync(pidFile);
    } catch {
      // The data dir is already gone.
    }
  });
  return server;
}

/**
 * A detached shell that outlives us: once this Deno process is gone (even by SIGKILL, when no
 * unload handler runs) it kills the servers listed in the pid files and removes the data dir.
 * Unref'd so it never keeps the event loop alive.
 */
function spawnWatchdog(dataDir: string): Deno.ChildProcess {
  const script = [
    'while kill -0 "$ENVTEST_PARENT" 2>/dev/null; do sleep 1; done',
    'for f in "$ENVTEST_DIR"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done',
    'rm -rf "$ENVTEST_DIR"',
  ].join("\n");
  const child = new Deno.Command("sh", {
    args: ["-c", script],
    env: { ENVTEST_PARENT: String(Deno.pid), ENVTEST_DIR: dataDir },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  return child;
}

async function stopServer(server: ServerProcess, graceMs: number): Promise<void> {
  if (server.exited) return;
  const signal = (s: Deno.Signal) => {
    try {
      server.child.kill(s);
    } catch {
      // Exited between the check and the signal.
    }
  };
  server.child.ref();
  signal(graceMs > 0 ? "SIGTERM" : "SIGKILL");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const escalate = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      signal("SIGKILL");
      resolve();
    }, graceMs);
  });
  try {
    await Promise.race([server.status, escalate]);
    await server.status;
  } finally {
    clearTimeout(timer);
  }
}

async function logTail(path: string, chars = 4000): Promise<string> {
  try {
    const text = await Deno.readTextFile(path);
    return text.slice(-chars);
  } catch {
    return "(no log)";
  }
}

function base64(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function kubeconfig(server: string, caPem: string, user: Record<string, string>): string {
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: "envtest",
        cluster: { server, "certificate-authority-data": base64(caPem) },
      }],
      users: [{ name: "envtest-user", user }],
      contexts: [{ name: "envtest", context: { cluster: "envtest", user: "envtest-user" } }],
      "current-context": "envtest",
    },
    null,
    2,
  );
}

/** Starts etcd and kube-apiserver, installs CRDs, and returns a handle to drive and stop them. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const binDir = await envtestBinDir();
  const crdDir = opts.crdDir ?? await defaultCrdDir();
  const dataDir = await Deno.makeTempDir({ prefix: "cocoon-envtest-" });
  const decoder = new TextDecoder();

  const ca = await createCertificateAuthority("cocoon-envtest-ca");
  const serving = await ca.issue({
    commonName: "kube-apiserver",
    dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
    ipAddresses: ["127.0.0.1", "10.0.0.1"],
    usage: "server",
  });
  const admin = await ca.issue({
    commonName: "envtest-admin",
    organizations: ["system:masters"],
    usage: "client",
  });
  const saKeys = await generateKeyPair();
  const files = {
    ca: `${dataDir}/ca.crt`,
    servingCert: `${dataDir}/apiserver.crt`,
    servingKey: `${dataDir}/apiserver.key`,
    saPub: `${dataDir}/sa.pub`,
    saKey: `${dataDir}/sa.key`,
  };
  await Deno.writeTextFile(files.ca, ca.certPem);
  await Deno.writeTextFile(files.servingCert, serving.certPem);
  await Deno.writeTextFile(files.servingKey, serving.keyPem, { mode: 0o600 });
  await Deno.writeTextFile(files.saPub, saKeys.publicKeyPem);
  await Deno.writeTextFile(files.saKey, saKeys.privateKeyPem, { mode: 0o600 });

  const etcdPort = freePort();
  const etcdPeerPort = freePort();
  const apiPort = freePort();
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;
  const kubeconfigPath = `${dataDir}/admin.kubeconfig`;
  await Deno.writeTextFile(
    kubeconfigPath,
    kubeconfig(server, ca.certPem, {
      "client-certificate-data": base64(admin.certPem),
      "client-key-data": base64(admin.keyPem),
    }),
    { mode: 0o600 },
  );

  const etcdArgs = [
    `--name=envtest`,
    `--data-dir=${dataDir}/etcd`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
    `--initial-cluster=envtest=http://127.0.0.1:${etcdPeerPort}`,
    // Test data is disposable: skipping fsync makes every write much cheaper.
    "--unsafe-no-fsync",
    "--log-level=warn",
  ];
  const apiArgs = [
    `--etcd-servers=${etcdUrl}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${apiPort}`,
    `--cert-dir=${dataDir}/apiserver-certs`,
    `--tls-cert-file=${files.servingCert}`,
    `--tls-private-key-file=${files.servingKey}`,
    `--client-ca-file=${files.ca}`,
    "--authorization-mode=RBAC",
    "--service-cluster-ip-range=10.0.0.0/24",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${files.saPub}`,
    `--service-account-signing-key-file=${files.saKey}`,
    // See the module comment: without a controller-manager no `default` ServiceAccount exists.
    "--disable-admission-plugins=ServiceAccount",
    "--allow-privileged=true",
    "--profiling=false",
    `--watch-cache=${opts.watchCache ?? false}`,
  ];

  let etcd: ServerProcess | undefined;
  let apiserver: ServerProcess | undefined;
  let stopped = false;
  const watchdog = spawnWatchdog(dataDir);

  const killNow = () => {
    for (const p of [apiserver, etcd]) {
      if (p && !p.exited) {
        try {
          p.child.kill("SIGKILL");
        } catch {
          // Already gone.
        }
      }
    }
    try {
      Deno.removeSync(dataDir, { recursive: true });
    } catch {
      // Nothing left to remove.
    }
  };
  liveCleanups.add(killNow);

  const adminClient = Deno.createHttpClient({
    caCerts: [ca.certPem],
    cert: admin.certPem,
    key: admin.keyPem,
  });

  const startApiServer = async (): Promise<void> => {
    if (apiserver && !apiserver.exited) return;
    const proc = spawnServer("kube-apiserver", `${binDir}/kube-apiserver`, apiArgs, dataDir);
    apiserver = proc;
    try {
      await waitUntil(async () => {
        if (proc.exited) throw new Error("kube-apiserver exited");
        const res = await fetch(`${server}/readyz`, { client: adminClient });
        await res.body?.cancel();
        return res.status === 200;
      }, { timeoutMs: 60_000, intervalMs: 100, what: "kube-apiserver /readyz" });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(
        `kube-apiserver did not become ready: ${message}\n--- kube-apiserver log tail ---\n${await logTail(
          proc.logFile,
        )}`,
      );
    }
  };

  const stopApiServer = async (): Promise<void> => {
    if (apiserver) await stopServer(apiserver, 15_000);
  };

  const kubectl = async (
    args: string[],
    kopts: { stdin?: string; kubeconfig?: string } = {},
  ): Promise<KubectlResult> => {
    const child = new Deno.Command(`${binDir}/kubectl`, {
      args: [`--kubeconfig=${kopts.kubeconfig ?? kubeconfigPath}`, ...args],
      // Keep kubectl's discovery cache per plane, so no two runs share stale API lists.
      env: { KUBECACHEDIR: `${dataDir}/kubectl-cache` },
      stdin: kopts.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    if (kopts.stdin !== undefined) {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(kopts.stdin));
      await writer.close();
    }
    const out = await child.output();
    return {
      code: out.code,
      stdout: decoder.decode(out.stdout),
      stderr: decoder.decode(out.stderr),
    };
  };

  const kubectlOk = async (args: string[], stdin?: string): Promise<string> => {
    const res = await kubectl(args, { stdin });
    if (res.code !== 0) {
      throw new Error(`kubectl ${args.join(" ")} failed (${res.code}): ${res.stderr}`);
    }
    return res.stdout;
  };

  const installCrds = async (dir: string): Promise<void> => {
    const names = (await kubectlOk(["apply", "--server-side", "-f", dir, "-o", "name"]))
      .split("\n").map((l) => l.trim()).filter((l) => l.length > 0);
    if (names.length === 0) return;
    await kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", ...names]);
  };

  const etcdPost = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(`${etcdUrl}${path}`, { method: "POST", body: JSON.stringify(body) });
    const json: unknown = await res.json();
    if (typeof json !== "object" || json === null) throw new Error(`etcd ${path}: bad reply`);
    if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json as Record<string, unknown>;
  };

  const compactEtcd = async (): Promise<void> => {
    // Any read returns the store's current revision in its header.
    const range = await etcdPost("/v3/kv/range", { key: base64("/registry"), limit: 1 });
    const header = range.header as { revision?: string } | undefined;
    const revision = header?.revision;
    if (!revision) throw new Error(`etcd range: no revision in ${JSON.stringify(range)}`);
    await etcdPost("/v3/kv/compaction", { revision, physical: true });
  };

  const serviceAccountKubeconfig = async (namespace: string, name: string): Promise<string> => {
    const objects = {
      apiVersion: "v1",
      kind: "List",
      items: [
        { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
        { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } },
      ],
    };
    await kubectlOk(["apply", "-f", "-"], JSON.stringify(objects));
    const token = (await kubectlOk(["create", "token", name, "-n", namespace, "--duration=24h"]))
      .trim();
    const path = `${dataDir}/sa-${namespace}-${name}.kubeconfig`;
    await Deno.writeTextFile(path, kubeconfig(server, ca.certPem, { token }), { mode: 0o600 });
    return path;
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    liveCleanups.delete(killNow);
    try {
      watchdog.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    watchdog.ref();
    await watchdog.status;
    // The data is thrown away, so there is nothing to shut down gracefully for.
    if (apiserver) await stopServer(apiserver, 0);
    if (etcd) await stopServer(etcd, 0);
    adminClient.close();
    if (Deno.env.get("ENVTEST_KEEP_DATA")) {
      console.error(`[control-plane] kept ${dataDir}`);
    } else {
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  };

  try {
    const etcdProc = spawnServer("etcd", `${binDir}/etcd`, etcdArgs, dataDir);
    etcd = etcdProc;
    await waitUntil(async () => {
      if (etcdProc.exited) throw new Error("etcd exited");
      const res = await fetch(`${etcdUrl}/health`);
      const body: unknown = await res.json();
      return typeof body === "object" && body !== null &&
        (body as { health?: unknown }).health === "true";
    }, { timeoutMs: 20_000, intervalMs: 50, what: "etcd /health" }).catch(async (err) => {
      throw new Error(`${err.message}\n--- etcd log tail ---\n${await logTail(etcdProc.logFile)}`);
    });
    await startApiServer();
    if (crdDir) await installCrds(crdDir);
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    server,
    kubeconfigPath,
    binDir,
    dataDir,
    caCertPem: ca.certPem,
    adminCertPem: admin.certPem,
    adminKeyPem: admin.keyPem,
    etcdUrl,
    kubectl,
    serviceAccountKubeconfig,
    stopApiServer,
    startApiServer,
    async restartApiServer() {
      await stopApiServer();
      await startApiServer();
    },
    compactEtcd,
    installCrds,
    stop,
  };
}
