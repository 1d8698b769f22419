/**
 * Runs a real OCI registry (Debian's docker-registry, CNCF distribution 2.8) for tests: a free
 * loopback port, a temporary storage directory, deletes enabled, and one of three auth modes:
 * none, htpasswd Basic, or token auth backed by tests/harness/token_server.ts. Helpers push a
 * tiny OCI manifest and list tags over plain HTTP, independently of the client under test.
 * A watchdog (tests/harness/watchdog.ts) kills the registry and removes its folder when this
 * process dies without calling `stop()`.
 */

import { freePort } from "./wait.ts";
import { BASIC_HTPASSWD, BASIC_PASSWORD, BASIC_USER } from "./registry_htpasswd.ts";
import { startTokenServer, type TokenServer } from "./token_server.ts";
import { removePidFile, spawnWatchdog, type Watchdog, writePidFile } from "./watchdog.ts";

/** Path of the registry binary (Debian package docker-registry). */
export const REGISTRY_BIN = "/usr/bin/docker-registry";

/** Auth modes the harness can configure. */
export type RegistryAuthMode = "none" | "basic" | "token";

/** A running registry. */
export interface TestRegistry {
  /** `127.0.0.1:<port>`, usable as the OCI_REGISTRY host. */
  host: string;
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Pid of the registry process. */
  pid: number;
  /**
   * Settles with one line when the registry exits without `stop()` asking it to; never rejects,
   * and stays pending otherwise.
   */
  readonly unexpectedExit: Promise<string>;
  auth: RegistryAuthMode;
  /** Accepted credentials (basic and token modes). */
  username: string;
  password: string;
  /** The token server (token mode only). */
  tokenServer?: TokenServer;
  /** Pushes a one-blob OCI manifest to repo:tag; returns its digest. Same content → same digest. */
  pushManifest(repo: string, tag: string, content?: string): Promise<string>;
  /** Tags of repo, sorted ([] when the repository is unknown). */
  tagsOf(repo: string): Promise<string[]>;
  /**
   * Every repository the registry knows, sorted (one that lost all its tags stays listed);
   * auth modes none and basic.
   */
  repositories(): Promise<string[]>;
  /** The manifest digest repo:tag names (a HEAD), or undefined when the tag is absent. */
  digestOf(repo: string, tag: string): Promise<string | undefined>;
  /** Deletes the manifest repo:tag names (by digest, which drops its tags); false if absent. */
  deleteTag(repo: string, tag: string): Promise<boolean>;
  /** Registry log so far (for failure messages). */
  log(): Promise<string>;
  /** Stops the registry (and token server) and removes the temp directory. */
  stop(): Promise<void>;
}

/** Whether the registry binary is installed (integration tests skip otherwise). */
export function registryAvailable(): boolean {
  try {
    return Deno.statSync(REGISTRY_BIN).isFile;
  } catch {
    return false;
  }
}

/** Options for {@linkcode startRegistry}. */
export interface RegistryOptions {
  auth: RegistryAuthMode;
  /**
   * Start the registry (and its watchdog) in a session of its own (default false), so a
   * terminal's Ctrl-C reaches only this process, which must call `stop()` (`deno task dev`).
   */
  detached?: boolean;
}

/** Starts a registry in the given auth mode and waits until it answers. */
export async function startRegistry(opts: RegistryOptions): Promise<TestRegistry> {
  const dir = await Deno.makeTempDir({ prefix: "cocoon-registry-" });
  const detached = opts.detached ?? false;
  const watchdog = spawnWatchdog({ pidDir: dir, removeDirs: [dir], detached });
  let tokenServer: TokenServer | undefined;
  let child: Deno.ChildProcess | undefined;
  try {
    const port = freePort();
    const authYaml = await authSection(opts.auth, dir, (ts) => (tokenServer = ts));
    const config = [
      "version: 0.1",
      "log:",
      "  level: info",
      "  accesslog:",
      "    disabled: true",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${dir}/data`,
      "  delete:",
      "    enabled: true",
      "  maintenance:",
      "    uploadpurging:",
      "      enabled: false",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      ...authYaml,
      "",
    ].join("\n");
    await Deno.writeTextFile(`${dir}/config.yml`, config);
    child = new Deno.Command("sh", {
      args: [
        "-c",
        `exec ${REGISTRY_BIN} serve "$1" >"$2" 2>&1`,
        "sh",
        `${dir}/config.yml`,
        `${dir}/registry.log`,
      ],
      stdin: "null",
      stdout: "null",
      stderr: "null",
      detached,
    }).spawn();
    writePidFile(dir, "registry", child.pid);
    const host = `127.0.0.1:${port}`;
    const url = `http://${host}`;
    await waitReady(url, child, dir);
    const reg = makeRegistry(host, url, opts.auth, dir, child, tokenServer, watchdog);
    return reg;
  } catch (err) {
    await watchdog.dismiss();
    await stopChild(child);
    await tokenServer?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw err;
  }
}

async function authSection(
  mode: RegistryAuthMode,
  dir: string,
  keep: (ts: TokenServer) => void,
): Promise<string[]> {
  if (mode === "none") return [];
  if (mode === "basic") {
    await Deno.writeTextFile(`${dir}/htpasswd`, BASIC_HTPASSWD);
    return ["auth:", "  htpasswd:", "    realm: cocoon-test", `    path: ${dir}/htpasswd`];
  }
  const ts = await startTokenServer({ dir, users: { [BASIC_USER]: BASIC_PASSWORD } });
  keep(ts);
  return [
    "auth:",
    "  token:",
    `    realm: ${ts.realm}`,
    `    service: ${ts.service}`,
    `    issuer: ${ts.issuer}`,
    `    rootcertbundle: ${ts.certPath}`,
  ];
}

function makeRegistry(
  host: string,
  url: string,
  auth: RegistryAuthMode,
  dir: string,
  child: Deno.ChildProcess,
  tokenServer: TokenServer | undefined,
  watchdog: Watchdog,
): TestRegistry {
  const authHeader = async (repo: string, actions: string): Promise<Record<string, string>> => {
    if (auth === "basic") {
      return { Authorization: `Basic ${btoa(`${BASIC_USER}:${BASIC_PASSWORD}`)}` };
    }
    if (auth === "token") {
      return {
        Authorization: `Bearer ${await tokenServer!.issue([`repository:${repo}:${actions}`])}`,
      };
    }
    return {};
  };
  const call = async (
    method: string,
    path: string,
    init: RequestInit,
    repo: string,
    actions: string,
  ) => {
    const headers = {
      ...(await authHeader(repo, actions)),
      ...(init.headers as Record<string, string>),
    };
    return await fetch(path.startsWith("http") ? path : `${url}${path}`, {
      ...init,
      method,
      headers,
    });
  };
  let stopped = false;
  const unexpectedExit = new Promise<string>((resolve) => {
    child.status.then(async (status) => {
      removePidFile(dir, "registry");
      if (stopped) return;
      const how = status.signal ? `on ${status.signal}` : `with code ${status.code}`;
      const log = await Deno.readTextFile(`${dir}/registry.log`).catch(() => "");
      const last = log.trimEnd().split("\n").pop();
      resolve(`docker-registry exited ${how}${last ? `; its last log line: ${last}` : ""}`);
    });
  });
  return {
    host,
    url,
    pid: child.pid,
    unexpectedExit,
    auth,
    username: BASIC_USER,
    password: BASIC_PASSWORD,
    tokenServer,
    async pushManifest(repo, tag, content = "{}") {
      const config = new TextEncoder().encode(content);
      const configDigest = await sha256(config);
      const start = await call("POST", `/v2/${repo}/blobs/uploads/`, {}, repo, "push,pull");
      await start.body?.cancel();
      const location = start.headers.get("location");
      if (start.status !== 202 || !location) throw new Error(`start upload: ${start.status}`);
      const uploadUrl = new URL(location, url);
      uploadUrl.searchParams.set("digest", configDigest);
      const put = await call(
        "PUT",
        uploadUrl.toString(),
        {
          body: config,
          headers: { "Content-Type": "application/octet-stream" },
        },
        repo,
        "push,pull",
      );
      const putText = await put.text();
      if (put.status !== 201) throw new Error(`upload blob: ${put.status} ${putText}`);
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {
          mediaType: "application/vnd.oci.image.config.v1+json",
          digest: configDigest,
          size: config.length,
        },
        layers: [],
      });
      const res = await call(
        "PUT",
        `/v2/${repo}/manifests/${tag}`,
        {
          body: manifest,
          headers: { "Content-Type": "application/vnd.oci.image.manifest.v1+json" },
        },
        repo,
        "push,pull",
      );
      const text = await res.text();
      if (res.status !== 201) throw new Error(`put manifest ${repo}:${tag}: ${res.status} ${text}`);
      return res.headers.get("docker-content-digest") ??
        await sha256(new TextEncoder().encode(manifest));
    },
    async tagsOf(repo) {
      const res = await call("GET", `/v2/${repo}/tags/list`, {}, repo, "pull");
      if (res.status === 404) {
        await res.body?.cancel();
        return [];
      }
      const body = await res.json() as { tags?: string[] | null };
      if (res.status !== 200) throw new Error(`tags/list ${repo}: ${res.status}`);
      return [...(body.tags ?? [])].sort();
    },
    async repositories() {
      if (auth === "token") throw new Error("repositories(): the catalog needs a registry scope");
      const out: string[] = [];
      // The registry answers at most 1000 names a page and links the next one.
      let path: string | undefined = "/v2/_catalog?n=1000";
      while (path) {
        const res = await call("GET", path, {}, "", "pull");
        const body = await res.json() as { repositories?: string[] | null };
        if (res.status !== 200) throw new Error(`_catalog: ${res.status} ${JSON.stringify(body)}`);
        out.push(...(body.repositories ?? []));
        path = res.headers.get("link")?.match(/^<([^>]+)>/)?.[1];
      }
      return out.sort();
    },
    async digestOf(repo, tag) {
      const res = await call(
        "HEAD",
        `/v2/${repo}/manifests/${tag}`,
        {
          headers: { Accept: "application/vnd.oci.image.manifest.v1+json" },
        },
        repo,
        "pull",
      );
      await res.body?.cancel();
      if (res.status === 404) return undefined;
      if (res.status !== 200) throw new Error(`HEAD ${repo}:${tag}: ${res.status}`);
      const digest = res.headers.get("docker-content-digest");
      if (!digest) throw new Error(`HEAD ${repo}:${tag}: no Docker-Content-Digest`);
      return digest;
    },
    async deleteTag(repo, tag) {
      const digest = await this.digestOf(repo, tag);
      if (!digest) return false;
      const res = await call("DELETE", `/v2/${repo}/manifests/${digest}`, {}, repo, "delete");
      await res.body?.cancel();
      if (res.status !== 202) throw new Error(`DELETE ${repo}@${digest}: ${res.status}`);
      return true;
    },
    log: () => Deno.readTextFile(`${dir}/registry.log`).catch(() => ""),
    async stop() {
      if (stopped) return;
      stopped = true;
      await watchdog.dismiss();
      await stopChild(child);
      await tokenServer?.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

async function waitReady(url: string, child: Deno.ChildProcess, dir: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  let exited = false;
  child.status.then(() => (exited = true));
  for (;;) {
    try {
      const res = await fetch(`${url}/v2/`);
      await res.body?.cancel();
      if (res.status === 200 || res.status === 401) return;
    } catch {
      // not listening yet
    }
    if (exited || Date.now() > deadline) {
      const log = await Deno.readTextFile(`${dir}/registry.log`).catch(() => "");
      throw new Error(`registry did not become ready${exited ? " (exited)" : ""}:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopChild(child: Deno.ChildProcess | undefined): Promise<void> {
  if (!child) return;
  try {
    child.kill("SIGTERM");
  } catch {
    // already exited
  }
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch {
      // already exited
    }
  }, 5_000);
  try {
    await child.status;
  } finally {
    clearTimeout(timer);
  }
}

async function sha256(data: Uint8Array<ArrayBuffer>): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  return `sha256:${[...hash].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}
