/**
 * Kubeconfig exec credential plugins (`users[].user.exec`), with the semantics of client-go's
 * plugin/pkg/client/auth/exec: the plugin is run with `KUBERNETES_EXEC_INFO` (an ExecCredential
 * whose spec says `interactive: false`, plus the cluster when `provideClusterInfo`), the
 * kubeconfig's `args` and `env`; its stdout is an ExecCredential of the configured apiVersion
 * (`client.authentication.k8s.io/v1` or `v1beta1`) whose status carries a bearer token and/or a
 * client certificate and key. The credential is kept until its `expirationTimestamp` (forever
 * without one), many callers share one plugin run, and a 401 answered to the current credential
 * runs the plugin again once.
 *
 * Deliberate differences from client-go, each because the operator runs in a Deno sandbox:
 * - The plugin gets a cleared environment: only PATH and HOME (when the sandbox grants them),
 *   the kubeconfig's `env` and KUBERNETES_EXEC_INFO, not the operator's whole environment
 *   (which the operator cannot read anyway under a scoped `--allow-env`). Anything else a
 *   plugin needs (AWS_PROFILE, CLOUDSDK_CONFIG, …) is named in the kubeconfig's `env`.
 * - The operator is never interactive (no terminal, stdin closed): `interactiveMode: Always` is
 *   refused when the kubeconfig is loaded, `IfAvailable` and `Never` run non-interactively.
 * - A run is killed after 30 s and its stdout is capped at 1 MiB; client-go waits and reads
 *   without a bound.
 * - stderr goes to the log, one line per entry, instead of the operator's stderr (so logs stay
 *   JSON lines). stdout, which holds the credential, is never logged.
 * - Shells, interpreters and `deno` are refused as plugins: the sandbox grants `--allow-run` for
 *   exactly one program, and one of those would run anything.
 */
import { getLogger } from "@logtape/logtape";
import { errorMessage } from "./errors.ts";
import { EXEC_INHERITED_ENV, type ExecApiVersion, type ExecConfig } from "./exec_config.ts";

export {
  type ExecApiVersion,
  type ExecConfig,
  ExecConfigError,
  execNeeds,
  parseExecConfig,
  refusedPluginReason,
} from "./exec_config.ts";

const log = getLogger(["cocoon-operator", "exec-credential"]);

/** How long one plugin run may take. */
export const DEFAULT_EXEC_TIMEOUT_MS = 30_000;
/** The most stdout a plugin may print (an ExecCredential with a certificate chain is ~10 KiB). */
export const MAX_EXEC_OUTPUT_BYTES = 1 << 20;

/** A plugin run that did not give a credential; the message is one line, never the credential. */
export class ExecPluginError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ExecPluginError";
  }
}

/** What a plugin returned. */
export interface ExecCredential {
  /** Bearer token, if any. */
  token?: string;
  /** PEM client certificate and key, both or neither. */
  certPem?: string;
  keyPem?: string;
  /** Epoch ms after which the credential is run for again; undefined: until a 401. */
  expiresAt?: number;
}

/**
 * Parses a plugin's stdout: an ExecCredential of `apiVersion` with a status holding a token or a
 * certificate/key pair. Throws ExecPluginError (the message never quotes the output).
 */
export function parseExecCredential(text: string, apiVersion: ExecApiVersion): ExecCredential {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new ExecPluginError("its output is not a JSON ExecCredential");
  }
  if (!isDoc(doc)) throw new ExecPluginError("its output is not a JSON ExecCredential");
  if (doc.kind !== "ExecCredential") {
    throw new ExecPluginError(
      `its output has kind ${JSON.stringify(doc.kind ?? "")}, want ExecCredential`,
    );
  }
  if (doc.apiVersion !== apiVersion) {
    throw new ExecPluginError(
      `it is configured to use API version ${apiVersion}, but returned version ${
        JSON.stringify(doc.apiVersion ?? "")
      }`,
    );
  }
  const status = doc.status;
  if (!isDoc(status)) throw new ExecPluginError("it did not return a status field");
  const field = (name: string) => {
    const v = status[name];
    if (v === undefined || v === null || v === "") return undefined;
    if (typeof v !== "string") throw new ExecPluginError(`its status.${name} is not a string`);
    return v;
  };
  const token = field("token");
  const certPem = field("clientCertificateData");
  const keyPem = field("clientKeyData");
  if (!token && !certPem && !keyPem) {
    throw new ExecPluginError("it did not return a token or a certificate/key pair");
  }
  if (!certPem !== !keyPem) {
    throw new ExecPluginError("it returned only a certificate or only a key, not both");
  }
  const credential: ExecCredential = {};
  if (token) credential.token = token;
  if (certPem && keyPem) {
    credential.certPem = certPem;
    credential.keyPem = keyPem;
  }
  const expiry = field("expirationTimestamp");
  if (expiry) {
    const at = Date.parse(expiry);
    if (Number.isNaN(at)) {
      throw new ExecPluginError(`its status.expirationTimestamp ${expiry} is not a timestamp`);
    }
    credential.expiresAt = at;
  }
  return credential;
}

/** The cluster as a plugin sees it in spec.cluster (client-go's clientauthentication.Cluster). */
export interface ExecClusterInfo {
  server: string;
  /** PEM CA bundle; sent base64-encoded as certificate-authority-data. */
  caPem?: string;
}

/** The KUBERNETES_EXEC_INFO value for a run. */
export function execInfo(config: ExecConfig, cluster: ExecClusterInfo): string {
  const spec: Doc = { interactive: false };
  if (config.provideClusterInfo) {
    const info: Doc = { server: cluster.server };
    if (cluster.caPem) info["certificate-authority-data"] = base64(cluster.caPem);
    if (config.clusterConfig !== undefined) info.config = config.clusterConfig;
    spec.cluster = info;
  }
  return JSON.stringify({ kind: "ExecCredential", apiVersion: config.apiVersion, spec });
}

function base64(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Options of ExecCredentialSource (tests shorten the timeout and the cap). */
export interface ExecRunOptions {
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** The operator's environment as the sandbox lets it be read. */
  env?: (name: string) => string | undefined;
  now?: () => number;
}

/**
 * Credentials from one exec plugin, cached until they expire. Concurrent callers share one
 * run; `unauthorized(used)` after a 401 drops `used` if it is still the current credential, so
 * a burst of 401s to one credential costs one new run.
 */
export class ExecCredentialSource {
  readonly #config: ExecConfig;
  readonly #cluster: ExecClusterInfo;
  readonly #opts: ExecRunOptions;
  #current?: ExecCredential;
  #running?: Promise<ExecCredential>;
  /** Plugin runs so far (successful or not). */
  runs = 0;

  constructor(config: ExecConfig, cluster: ExecClusterInfo, opts: ExecRunOptions = {}) {
    this.#config = config;
    this.#cluster = cluster;
    this.#opts = opts;
  }

  /** The plugin's program, for messages. */
  get command(): string {
    return this.#config.command;
  }

  /** The current credential, running the plugin when there is none or it has expired. */
  get(): Promise<ExecCredential> {
    const now = (this.#opts.now ?? Date.now)();
    const current = this.#current;
    if (current && (current.expiresAt === undefined || now <= current.expiresAt)) {
      return Promise.resolve(current);
    }
    if (!this.#running) {
      this.#running = this.#run().then((credential) => {
        this.#current = credential;
        return credential;
      }).finally(() => {
        this.#running = undefined;
      });
    }
    return this.#running;
  }

  /**
   * The API server refused `used` (401): forget it unless a newer one already replaced it; the
   * next get() runs the plugin.
   */
  unauthorized(used: ExecCredential): void {
    if (this.#current === used) {
      log.info(
        "the API server refused the exec plugin's credential (401); running {command} again",
        {
          command: this.#config.command,
          user: this.#config.user,
        },
      );
      this.#current = undefined;
    }
  }

  async #run(): Promise<ExecCredential> {
    this.runs++;
    const config = this.#config;
    const started = performance.now();
    try {
      const stdout = await runPlugin(config, this.#cluster, this.#opts);
      const credential = parseExecCredential(stdout, config.apiVersion);
      log.debug("exec plugin {command} returned a credential", {
        command: config.command,
        user: config.user,
        token: credential.token !== undefined,
        certificate: credential.certPem !== undefined,
        expires: credential.expiresAt === undefined
          ? "never"
          : new Date(credential.expiresAt).toISOString(),
        durationMs: Math.round(performance.now() - started),
      });
      return credential;
    } catch (err) {
      const message = err instanceof ExecPluginError ? err.message : errorMessage(err);
      throw new ExecPluginError(
        `exec credential plugin ${config.command} of kubeconfig user ${config.user}: ${message}`,
      );
    }
  }
}

/** Runs the plugin once and returns its stdout; throws ExecPluginError. */
async function runPlugin(
  config: ExecConfig,
  cluster: ExecClusterInfo,
  opts: ExecRunOptions,
): Promise<string> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  const cap = opts.maxOutputBytes ?? MAX_EXEC_OUTPUT_BYTES;
  const env: Record<string, string> = {};
  for (const name of EXEC_INHERITED_ENV) {
    const value = opts.env?.(name);
    if (value !== undefined) env[name] = value;
  }
  for (const e of config.env) env[e.name] = e.value;
  env.KUBERNETES_EXEC_INFO = execInfo(config, cluster);
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(config.command, {
      args: config.args,
      clearEnv: true,
      env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new ExecPluginError(
        `executable ${config.command} not found` +
          (config.installHint ? `; ${config.installHint.replace(/\s*\n\s*/g, " ")}` : ""),
      );
    }
    if (err instanceof Deno.errors.NotCapable || err instanceof Deno.errors.PermissionDenied) {
      throw new ExecPluginError(
        `the sandbox does not grant running ${config.command} (--allow-run names the one ` +
          "plugin path `deno task start` resolved; see docs/configuration.md)",
      );
    }
    throw new ExecPluginError(`cannot start it: ${errorMessage(err).split("\n")[0]}`);
  }
  let timedOut = false;
  let overflow = false;
  const kill = () => {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
  };
  const stdoutReader = child.stdout.getReader();
  const stderrReader = child.stderr.getReader();
  // Killing the plugin does not close its pipes when a child of it still holds them (a script
  // running `sleep`), so a timeout also stops reading.
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
    stdoutReader.cancel().catch(() => {});
    stderrReader.cancel().catch(() => {});
  }, timeoutMs);
  try {
    const [stdout, , status] = await Promise.all([
      readCapped(stdoutReader, cap, () => {
        overflow = true;
        kill();
      }),
      logStderr(stderrReader, config),
      child.status,
    ]);
    if (timedOut) throw new ExecPluginError(`it did not finish within ${timeoutMs / 1000} s`);
    if (overflow) throw new ExecPluginError(`its output exceeds ${cap} bytes`);
    if (!status.success) {
      throw new ExecPluginError(
        status.signal
          ? `it was killed by ${status.signal}`
          : `it failed with exit code ${status.code}`,
      );
    }
    return stdout;
  } finally {
    clearTimeout(timer);
  }
}

/** Reads a stream as text, calling onOverflow (once) and discarding the rest past `cap` bytes. */
async function readCapped(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  cap: number,
  onOverflow: () => void,
): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > cap) {
      chunks.length = 0;
      onOverflow();
      await reader.cancel();
      return "";
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

/** The most stderr logged per run; a chatty plugin cannot flood the log. */
const MAX_STDERR_LINES = 50;

/** Logs the plugin's stderr, one entry per line (client-go passes it to its own stderr). */
async function logStderr(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  config: ExecConfig,
): Promise<void> {
  let lines = 0;
  let rest = "";
  const emit = (line: string) => {
    if (line.trim() === "") return;
    lines++;
    if (lines > MAX_STDERR_LINES) return;
    log.warn("exec plugin {command} stderr: {line}", {
      command: config.command,
      user: config.user,
      line: line.slice(0, 2000),
    });
  };
  const decoder = new TextDecoder();
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    const parts = (rest + decoder.decode(value, { stream: true })).split("\n");
    rest = parts.pop() ?? "";
    parts.forEach(emit);
  }
  emit(rest);
  if (lines > MAX_STDERR_LINES) {
    log.warn("exec plugin {command} wrote {dropped} more stderr lines, not logged", {
      command: config.command,
      dropped: lines - MAX_STDERR_LINES,
    });
  }
}

type Doc = Record<string, unknown>;

function isDoc(v: unknown): v is Doc {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
