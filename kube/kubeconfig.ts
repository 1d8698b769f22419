/**
 * Finding and reading the API server connection without ambient authority: which source applies
 * (controller-runtime's GetConfig order: $KUBECONFIG, then the in-cluster service account, then
 * ~/.kube/config), and exactly which files that source reads, so the operator's Deno permission
 * set can name them and nothing more.
 *
 * Deliberate differences from client-go / client-node:
 * - In cluster the API server is addressed as `kubernetes.default.svc` (port from
 *   KUBERNETES_SERVICE_PORT, default 443), not by the KUBERNETES_SERVICE_HOST IP, so one
 *   `--allow-net` entry fits every cluster. KUBERNETES_SERVICE_HOST only tells that we are in a
 *   pod. The API server's serving certificate carries that name in every conformant cluster.
 * - Kubeconfig users with an auth-provider are refused with a message (client-go dropped its
 *   providers too). So are `insecure-skip-tls-verify`, `tls-server-name` and `proxy-url`, which
 *   Deno's HTTP client cannot honour, and the impersonation fields (`as`, `as-uid`, `as-groups`,
 *   `as-user-extra`), which client-go sends as Impersonate-* headers and this client does not:
 *   dropping them silently would run the operator as the underlying identity. Exec plugins are
 *   run as client-go runs them (kube/exec_credential.ts), under an `--allow-run` that names only
 *   that plugin (local mode).
 * - client-node's KubeConfig is not used for loading: importing it pulls in HTTP agents that
 *   enumerate the whole environment at import time, which a scoped `--allow-env` refuses. Its
 *   YAML reader is not used either: it drags in the whole model serializer (about 55 ms of the
 *   operator's start-up) to return the same plain object js-yaml (its own parser) returns.
 */
import { dirname, resolve } from "node:path";
import { load as loadYaml } from "js-yaml";
import { errorMessage } from "./errors.ts";
import { type ExecConfig, parseExecConfig } from "./exec_config.ts";

/** Where a pod's service-account credentials are mounted. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** The in-cluster DNS name of the API server (the `kubernetes` Service in `default`). */
export const IN_CLUSTER_API_HOST = "kubernetes.default.svc";

/** Reads an environment variable; undefined when unset (or not readable). */
export type EnvLookup = (name: string) => string | undefined;

/** Whether a file is there: "missing", "present", or "denied" when the sandbox forbids looking. */
export type FileProbe = (path: string) => "present" | "missing" | "denied";

/** The source the connection comes from. */
export type ClusterSource =
  | {
    kind: "kubeconfig";
    /**
     * What pointed at the files: the --kubeconfig flag, the KUBECONFIG variable or the
     * home-directory default.
     */
    origin: "--kubeconfig" | "KUBECONFIG" | "~/.kube/config";
    /** Kubeconfig files in precedence order (existing ones only). */
    paths: string[];
  }
  | {
    kind: "in-cluster";
    /** `https://kubernetes.default.svc:<port>` */
    server: string;
    tokenFile: string;
    caFile: string;
  };

/** No source applies; the message names everything that was tried, on one line. */
export class NoClusterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NoClusterError";
  }
}

/** A kubeconfig that cannot be used by this operator (unsupported field, broken file). */
export class KubeconfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KubeconfigError";
  }
}

/** The real file system, answering "denied" instead of throwing when read access is missing. */
export const probeFile: FileProbe = (path: string): "present" | "missing" | "denied" => {
  try {
    Deno.statSync(path);
    return "present";
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return "missing";
    if (err instanceof Deno.errors.NotCapable || err instanceof Deno.errors.PermissionDenied) {
      return "denied";
    }
    return "missing";
  }
};

/**
 * Picks the connection source. Throws NoClusterError naming what was tried (and why each did not
 * apply) when none does; an explicit KUBECONFIG whose files all are missing is not skipped.
 * explicitPath is the --kubeconfig flag: one file that, as in controller-runtime, comes before
 * everything else and must exist.
 */
export function locateCluster(
  env: EnvLookup,
  probe: FileProbe = probeFile,
  explicitPath?: string,
): ClusterSource {
  if (explicitPath) {
    const state = probe(explicitPath);
    if (state === "present") {
      return { kind: "kubeconfig", origin: "--kubeconfig", paths: [explicitPath] };
    }
    throw new NoClusterError(
      `no Kubernetes cluster configured: --kubeconfig=${explicitPath} ` +
        (state === "denied" ? "cannot be read (no read permission)" : "names no existing file") +
        `; ${DEV_HINT}`,
    );
  }
  const tried: string[] = [];
  const list = env("KUBECONFIG");
  if (list) {
    const paths = list.split(":").filter((p) => p !== "");
    const found = paths.filter((p) => probe(p) === "present");
    if (found.length > 0) return { kind: "kubeconfig", origin: "KUBECONFIG", paths: found };
    const denied = paths.filter((p) => probe(p) === "denied");
    throw new NoClusterError(
      `no Kubernetes cluster configured: KUBECONFIG=${list} ` +
        (denied.length ? `cannot be read (no read permission for ${denied.join(", ")})` : "") +
        (denied.length && denied.length < paths.length ? " or " : "") +
        (denied.length < paths.length ? "names no existing file" : "") +
        `; ${DEV_HINT}`,
    );
  }
  tried.push("KUBECONFIG (unset)");

  const serviceHost = env("KUBERNETES_SERVICE_HOST");
  const tokenFile = `${SERVICE_ACCOUNT_DIR}/token`;
  if (serviceHost) {
    const token = probe(tokenFile);
    if (token === "present") {
      const port = env("KUBERNETES_SERVICE_PORT") || "443";
      return {
        kind: "in-cluster",
        server: `https://${IN_CLUSTER_API_HOST}:${port}`,
        tokenFile,
        caFile: `${SERVICE_ACCOUNT_DIR}/ca.crt`,
      };
    }
    tried.push(`in-cluster (${tokenFile} ${token === "denied" ? "not readable" : "missing"})`);
  } else {
    tried.push("in-cluster (KUBERNETES_SERVICE_HOST unset)");
  }

  const home = env("HOME");
  if (home) {
    const path = `${home.replace(/\/+$/, "")}/.kube/config`;
    const state = probe(path);
    if (state === "present") return { kind: "kubeconfig", origin: "~/.kube/config", paths: [path] };
    tried.push(`~/.kube/config (${path} ${state === "denied" ? "not readable" : "missing"})`);
  } else {
    tried.push("~/.kube/config (HOME unset)");
  }
  throw new NoClusterError(
    `no Kubernetes cluster configured: tried ${tried.join(", ")}; ${DEV_HINT}`,
  );
}

/** Where to point a developer who has no cluster. */
const DEV_HINT = "for a local sandbox cluster run `deno task dev`";

/** One line saying where a source came from, for messages. */
export function describeSource(source: ClusterSource): string {
  return source.kind === "in-cluster"
    ? `in-cluster service account, ${source.server}`
    : `${source.origin}=${source.paths.join(":")}`;
}

/** PEM material given inline or as a file to read. */
export type Material = { pem: string } | { file: string };

/**
 * Everything needed to talk to the API server, without having read any credential yet: the
 * endpoint, where the CA, client certificate, key and token come from, and every file that
 * reading them takes (so a permission check can run before the first read).
 */
export interface ClusterAccess {
  source: ClusterSource;
  server: string;
  ca?: Material;
  cert?: Material;
  key?: Material;
  token?: string;
  /** Re-read on refresh (projected or rotated tokens). */
  tokenFile?: string;
  basic?: { username: string; password: string };
  /** The user's exec credential plugin (kube/exec_credential.ts), run when credentials are needed. */
  exec?: ExecConfig;
  /** Every file this access reads, kubeconfig files included. */
  files: string[];
}

/** Reads a text file; tests pass an in-memory one. */
export type ReadText = (path: string) => string;

const readTextSync: ReadText = (path) => Deno.readTextFileSync(path);

/** The access a located source gives; reads (only) the kubeconfig files themselves. */
export function clusterAccess(source: ClusterSource, read: ReadText = readTextSync): ClusterAccess {
  if (source.kind === "in-cluster") {
    return {
      source,
      server: source.server,
      ca: { file: source.caFile },
      tokenFile: source.tokenFile,
      files: [source.tokenFile, source.caFile],
    };
  }
  return loadKubeconfig(source, read);
}

type Doc = Record<string, unknown>;

function isDoc(v: unknown): v is Doc {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(d: Doc, key: string): string | undefined {
  const v = d[key];
  return typeof v === "string" && v !== "" ? v : undefined;
}

/**
 * Merges the kubeconfig files (client-go rules: for clusters, users and contexts the first file
 * defining a name wins, and the first file setting current-context wins), resolves relative
 * paths against the file that holds them, and returns the current context's access.
 */
export function loadKubeconfig(
  source: ClusterSource & { kind: "kubeconfig" },
  read: ReadText = readTextSync,
): ClusterAccess {
  const paths = source.paths;
  if (paths.length === 0) throw new KubeconfigError("no kubeconfig file given");
  const clusters = new Map<string, { entry: Doc; dir: string }>();
  const users = new Map<string, { entry: Doc; dir: string }>();
  const contexts = new Map<string, Doc>();
  let current: string | undefined;
  for (const path of paths) {
    let doc: unknown;
    try {
      const text = read(path);
      // client-go reads an empty (or comment-only, or null) file as an empty config.
      doc = isBlankYaml(text) ? {} : loadYaml(text) ?? {};
    } catch (err) {
      if (err instanceof Deno.errors.NotCapable) {
        throw new KubeconfigError(`cannot read kubeconfig ${path}: no read permission`);
      }
      throw new KubeconfigError(`cannot read kubeconfig ${path}: ${firstLine(err)}`);
    }
    if (!isDoc(doc)) throw new KubeconfigError(`kubeconfig ${path} is not a YAML mapping`);
    const dir = dirname(path);
    for (const [list, into] of [["clusters", clusters], ["users", users]] as const) {
      for (const named of arrayOf(doc[list])) {
        const name = str(named, "name");
        const body = named[list === "clusters" ? "cluster" : "user"];
        if (name && isDoc(body) && !into.has(name)) into.set(name, { entry: body, dir });
      }
    }
    for (const named of arrayOf(doc.contexts)) {
      const name = str(named, "name");
      if (name && isDoc(named.context) && !contexts.has(name)) contexts.set(name, named.context);
    }
    current ??= str(doc, "current-context");
  }
  const where = paths.join(":");
  if (!current) throw new KubeconfigError(`kubeconfig ${where} has no current-context`);
  const context = contexts.get(current);
  if (!context) throw new KubeconfigError(`kubeconfig ${where}: context ${current} not found`);
  const clusterName = str(context, "cluster") ?? "";
  const cluster = clusters.get(clusterName);
  if (!cluster) {
    throw new KubeconfigError(`kubeconfig ${where}: cluster ${clusterName} not found`);
  }
  const rawServer = str(cluster.entry, "server");
  if (!rawServer) {
    throw new KubeconfigError(`kubeconfig ${where}: cluster ${clusterName} has no server`);
  }
  for (const unsupported of ["insecure-skip-tls-verify", "tls-server-name", "proxy-url"]) {
    const v = cluster.entry[unsupported];
    if (v !== undefined && v !== false && v !== "") {
      throw new KubeconfigError(
        `kubeconfig cluster ${clusterName} sets ${unsupported}, which the operator does not ` +
          "support; give certificate-authority(-data) and a direct server URL instead",
      );
    }
  }
  const userName = str(context, "user") ?? "";
  const user = users.get(userName)?.entry ?? {};
  const userDir = users.get(userName)?.dir ?? cluster.dir;
  refuseIdentityOverrides(userName, user);
  if (isDoc(user["auth-provider"])) {
    throw new KubeconfigError(
      `kubeconfig user ${userName} uses the ${
        str(user["auth-provider"], "name") ?? "?"
      } auth-provider, which the operator does not support: use a token, a token file or a ` +
        "client certificate",
    );
  }

  const files = [...paths];
  const material = (entry: Doc, dir: string, fileKey: string, dataKey: string) => {
    const data = str(entry, dataKey);
    if (data) return { pem: decodeBase64(data, dataKey) };
    const file = str(entry, fileKey);
    if (!file) return undefined;
    const abs = resolve(dir, file);
    files.push(abs);
    return { file: abs };
  };
  const ca = material(
    cluster.entry,
    cluster.dir,
    "certificate-authority",
    "certificate-authority-data",
  );
  const cert = material(user, userDir, "client-certificate", "client-certificate-data");
  const access: ClusterAccess = {
    source,
    server: serverUrl(clusterName, rawServer, ca !== undefined || cert !== undefined),
    ca,
    cert,
    key: material(user, userDir, "client-key", "client-key-data"),
    files,
  };
  const token = str(user, "token");
  const tokenFile = str(user, "tokenFile");
  if (token) access.token = token;
  else if (tokenFile) {
    access.tokenFile = resolve(userDir, tokenFile);
    files.push(access.tokenFile);
  }
  const username = str(user, "username");
  if (username && !access.token && !access.tokenFile) {
    access.basic = { username, password: str(user, "password") ?? "" };
  }
  if (isDoc(user.exec)) {
    // Checked even when unused, as client-go's kubeconfig validation does; but a token, basic
    // auth or a client certificate in the kubeconfig wins over the plugin, which then never runs.
    let exec: ExecConfig;
    try {
      exec = parseExecConfig(userName, user.exec, userDir, cluster.entry.extensions);
    } catch (err) {
      throw new KubeconfigError(errorMessage(err));
    }
    if (!access.token && !access.tokenFile && !access.basic && !cert) access.exec = exec;
  }
  return access;
}

/**
 * User fields that would make the API server see another identity than the credentials', or
 * change how requests are sent, and that this client does not implement. Accepting them and
 * sending requests without them would run the operator silently as the underlying identity.
 */
export const UNSUPPORTED_USER_FIELDS: readonly string[] = [
  "as",
  "as-uid",
  "as-groups",
  "as-user-extra",
];

function refuseIdentityOverrides(userName: string, user: Doc): void {
  for (const field of UNSUPPORTED_USER_FIELDS) {
    const v = user[field];
    const empty = v === undefined || v === null || v === "" ||
      (Array.isArray(v) && v.length === 0) || (isDoc(v) && Object.keys(v).length === 0);
    if (empty) continue;
    throw new KubeconfigError(
      `kubeconfig user ${userName} sets ${field} (impersonation), which the operator does not ` +
        "implement: it would run as the underlying identity instead; bind the permissions to " +
        "the credential's own identity and remove the field",
    );
  }
}

/** Reads a Material; a missing permission or file is a KubeconfigError naming the path. */
export async function readMaterial(m: Material | undefined): Promise<string | undefined> {
  if (!m) return undefined;
  if ("pem" in m) return m.pem;
  try {
    return await Deno.readTextFile(m.file);
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) {
      throw new KubeconfigError(`cannot read ${m.file}: no read permission`);
    }
    throw new KubeconfigError(`cannot read ${m.file}: ${firstLine(err)}`);
  }
}

/**
 * The cluster's server as an http(s) URL without a trailing slash. A server written without a
 * scheme gets client-go's default (rest.DefaultServerURL): https when the connection has TLS
 * material (a CA or a client certificate), http otherwise.
 */
function serverUrl(clusterName: string, server: string, tls: boolean): string {
  const withScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(server)
    ? server
    : `${tls ? "https" : "http"}://${server}`;
  let url: URL | undefined;
  try {
    url = new URL(withScheme);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.hostname === "") {
    throw new KubeconfigError(
      `kubeconfig cluster ${clusterName} has server ${JSON.stringify(server)}, ` +
        "which is not an http(s) URL",
    );
  }
  return withScheme.replace(/\/+$/, "");
}

/** Whether a YAML text holds no document: only blank lines and comments. */
function isBlankYaml(text: string): boolean {
  return text.split("\n").every((line) => /^\s*(#.*)?$/.test(line));
}

function arrayOf(v: unknown): Doc[] {
  return Array.isArray(v) ? v.filter(isDoc) : [];
}

function decodeBase64(data: string, key: string): string {
  try {
    const bin = atob(data.replace(/\s+/g, ""));
    return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    throw new KubeconfigError(`kubeconfig ${key} is not valid base64`);
  }
}

function firstLine(err: unknown): string {
  return errorMessage(err).split("\n")[0];
}
