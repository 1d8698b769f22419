/**
 * The registry side of the simulated vk-cocoon: a minimal OCI distribution client that pushes a
 * snapshot manifest (one config blob upload, then a manifest PUT by tag) and pulls it back (GET
 * or HEAD of the manifest). It speaks plain HTTP without authentication and only to loopback
 * registries: the simulator exists for tests and local runs, never for a real registry.
 *
 * The registry address takes the operator's OCI_REGISTRY form (`host[:port][/path/prefix]`,
 * optionally written with `http://`), so one value configures both and a VM's repository is the
 * same `<prefix>/<vmName>` the operator probes and deletes.
 *
 * @module
 */
import { parseRegistryBase, repositoryFor } from "../snapshot/reference.ts";

/** Media type of the manifests the simulator pushes. */
const OCI_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG_TYPE = "application/vnd.oci.image.config.v1+json";

/** The manifest shape the simulator pushes and reads back. */
export interface OciManifest {
  schemaVersion: number;
  mediaType?: string;
  config?: { mediaType?: string; digest?: string; size?: number };
  layers?: unknown[];
}

/** A pulled manifest and the digest that names it in the registry. */
export interface PulledManifest {
  manifest: OciManifest;
  /** `sha256:<hex>`. */
  digest: string;
}

/** A registry answer the simulator did not expect (status and the start of the body). */
export class RegistryHttpError extends Error {
  constructor(readonly status: number, what: string, body: string) {
    super(`${what}: HTTP ${status}${body ? `: ${body.slice(0, 300)}` : ""}`);
    this.name = "RegistryHttpError";
  }
}

/** Where the simulator's registry is: the HTTP origin and the repository prefix. */
export interface SimRegistryAddress {
  /** `http://host:port`. */
  origin: string;
  /** `host:port`, as the operator's OCI_REGISTRY would name it. */
  host: string;
  /** Path every VM repository sits under; "" for the registry root. */
  prefix: string;
}

const LOOPBACK_HOST = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d+)?$/;

/**
 * Parses the registry address (`127.0.0.1:5000/cocoon`, `http://localhost:5000`, ...). Throws on
 * anything that is not a loopback host: pushes carry no credentials and no TLS.
 */
export function parseSimRegistryAddress(url: string): SimRegistryAddress {
  if (/^https:\/\//i.test(url)) {
    throw new Error(`simulator registry ${JSON.stringify(url)}: only plain http is supported`);
  }
  const bare = url.replace(/^http:\/\//i, "").replace(/\/+$/, "");
  const base = parseRegistryBase(bare);
  if (!LOOPBACK_HOST.test(base.registry)) {
    throw new Error(
      `simulator registry ${JSON.stringify(url)}: host ${base.registry} is not loopback ` +
        "(the simulator only pushes to a local test registry)",
    );
  }
  return { origin: `http://${base.registry}`, host: base.registry, prefix: base.prefix };
}

export interface SimRegistryOptions {
  /** Per-request timeout (default 10 s). */
  timeoutMs?: number;
}

/**
 * Pushes and reads snapshot manifests for the simulated VMs. Stateless apart from its address,
 * so concurrent calls for different VMs are independent.
 */
export class SimRegistry {
  readonly address: SimRegistryAddress;
  readonly #timeoutMs: number;

  constructor(url: string, opts: SimRegistryOptions = {}) {
    this.address = parseSimRegistryAddress(url);
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /** The repository of a VM's snapshots (`<prefix>/<vmName>`). */
  repository(vmName: string): string {
    return repositoryFor({ registry: this.address.host, prefix: this.address.prefix }, vmName);
  }

  /**
   * Pushes `vmName:tag` as a manifest whose config blob is `content`; returns the manifest
   * digest. Distinct content gives a distinct digest, which is what keeps a `:hibernate` and a
   * `:latest` push from ever sharing one (a tag delete by digest would take both).
   */
  async push(vmName: string, tag: string, content: string, signal?: AbortSignal): Promise<string> {
    const repo = this.repository(vmName);
    const blob = new TextEncoder().encode(content);
    const blobDigest = await sha256Digest(blob);
    const start = await this.#fetch("POST", `/v2/${repo}/blobs/uploads/`, {}, signal);
    await start.body?.cancel();
    const location = start.headers.get("location");
    if (start.status !== 202 || !location) {
      throw new RegistryHttpError(start.status, `start blob upload to ${repo}`, "");
    }
    const uploadUrl = new URL(location, this.address.origin);
    uploadUrl.searchParams.set("digest", blobDigest);
    const put = await this.#fetch("PUT", uploadUrl.toString(), {
      body: blob,
      headers: { "Content-Type": "application/octet-stream" },
    }, signal);
    const putText = await put.text();
    if (put.status !== 201) {
      throw new RegistryHttpError(put.status, `upload blob to ${repo}`, putText);
    }
    const manifest: OciManifest = {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST_TYPE,
      config: { mediaType: OCI_CONFIG_TYPE, digest: blobDigest, size: blob.length },
      layers: [],
    };
    const manifestBytes = new TextEncoder().encode(JSON.stringify(manifest));
    const res = await this.#fetch("PUT", `/v2/${repo}/manifests/${tag}`, {
      body: manifestBytes,
      headers: { "Content-Type": OCI_MANIFEST_TYPE },
    }, signal);
    const text = await res.text();
    if (res.status !== 201) {
      throw new RegistryHttpError(res.status, `put manifest ${repo}:${tag}`, text);
    }
    return res.headers.get("docker-content-digest") ?? await sha256Digest(manifestBytes);
  }

  /** Whether `vmName:tag` exists (manifest HEAD; 404 is "no"). */
  async hasManifest(vmName: string, tag: string, signal?: AbortSignal): Promise<boolean> {
    const repo = this.repository(vmName);
    const res = await this.#fetch("HEAD", `/v2/${repo}/manifests/${tag}`, {
      headers: { Accept: OCI_MANIFEST_TYPE },
    }, signal);
    await res.body?.cancel();
    if (res.status === 404) return false;
    if (res.status !== 200) throw new RegistryHttpError(res.status, `head ${repo}:${tag}`, "");
    return true;
  }

  /**
   * Pulls the manifest of `vmName:tag` (GET) with its digest; undefined when the tag is absent.
   * The digest is the registry's `Docker-Content-Digest`, else that of the bytes received.
   */
  async getManifest(
    vmName: string,
    tag: string,
    signal?: AbortSignal,
  ): Promise<PulledManifest | undefined> {
    const repo = this.repository(vmName);
    const res = await this.#fetch("GET", `/v2/${repo}/manifests/${tag}`, {
      headers: { Accept: OCI_MANIFEST_TYPE },
    }, signal);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const text = new TextDecoder().decode(bytes);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new RegistryHttpError(res.status, `get ${repo}:${tag}`, text);
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || !("schemaVersion" in parsed)) {
      throw new Error(`get ${repo}:${tag}: not a manifest`);
    }
    const digest = res.headers.get("docker-content-digest") ?? await sha256Digest(bytes);
    return { manifest: parsed as OciManifest, digest };
  }

  #fetch(
    method: string,
    pathOrUrl: string,
    init: RequestInit,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${this.address.origin}${pathOrUrl}`;
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    return fetch(url, {
      ...init,
      method,
      redirect: "error",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  }
}

/** The OCI digest (`sha256:<hex>`) of some bytes. */
export async function sha256Digest(data: Uint8Array<ArrayBuffer>): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  return `sha256:${[...hash].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}
