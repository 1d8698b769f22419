/**
 * OciRegistry: the Registry contract over the OCI distribution API, rooted at OCI_REGISTRY
 * (`host[:port][/path/prefix]`, a VM's repository is `<prefix>/<vmName>`).
 *
 * - hasManifest: HEAD the manifest (Accept: OCI manifest + index, Docker v2 manifest + list,
 *   and the schema1 types go-containerregistry also lists). 200 → true, 404 → false, anything
 *   else → RegistryError (a failed probe is never "absent").
 * - deleteManifest: DELETE by tag (scope `push,pull,delete`, as ggcr); 200/202 and 404 succeed.
 *   Registries that refuse deleting by tag (distribution 2.x answers 400 DIGEST_INVALID, others
 *   405 / UNSUPPORTED) get the tag resolved to its digest and the digest deleted, unless the other
 *   tag we keep for the VM (`latest` for `hibernate` and vice versa) points at the same digest:
 *   deleting the digest would take that tag with it, so the delete is skipped with a warning.
 *   Keeping a stale tag is recoverable; losing a VM's only snapshot is not.
 */

import { getLogger } from "@logtape/logtape";
import { chainKeychains, type Keychain } from "./auth/keychain.ts";
import { dockerConfigKeychain } from "./auth/docker_config.ts";
import { envFrom, type EnvGetter, processEnv, readFile, type TextFileReader } from "./auth/env.ts";
import { googleKeychain } from "./auth/google.ts";
import type { FetchFn } from "./deadline.ts";
import { parseDiagnostics, RegistryError } from "./errors.ts";
import {
  checkReference,
  formatRef,
  isDigest,
  isValidDigest,
  parseRegistryBase,
  type RegistryBase,
  repositoryFor,
} from "./reference.ts";
import { DEFAULT_SNAPSHOT_TAG, HIBERNATE_SNAPSHOT_TAG, type Registry } from "./registry.ts";
import { type HttpResult, RegistrySession } from "./session.ts";

const logger = getLogger(["cocoon-operator", "snapshot"]);

/** Manifest media types accepted on HEAD (go-containerregistry's allManifestMediaTypes). */
export const MANIFEST_ACCEPT = [
  "application/vnd.docker.distribution.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.v1+prettyjws",
  "application/vnd.docker.distribution.manifest.v2+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.oci.image.index.v1+json",
].join(",");

/** Default per-request timeout. */
const DEFAULT_TIMEOUT_MS = 30_000;

/** Options of newOciRegistry. */
export interface OciRegistryOptions {
  /** Environment for credential discovery: a record or a getter (default: the process env). */
  env?: Record<string, string | undefined> | EnvGetter;
  /** fetch to use (default: global fetch, which pools connections per host). */
  fetch?: FetchFn;
  /** Per-request timeout in ms (default 30 s). */
  timeoutMs?: number;
  /** Credential source (default: Google ADC for Google hosts, then Docker config, then none). */
  keychain?: Keychain;
  /** File reader for credential files (default: Deno.readTextFile). */
  readTextFile?: TextFileReader;
  /** Clock (ms since epoch) for token expiry. */
  now?: () => number;
  /** Hosts plain http is allowed to by name (--allow-plain-http). */
  plainHttpHosts?: readonly string[];
}

/** Why a tag delete was skipped, reported to callers that care (the Registry contract does not). */
export interface DeleteOutcome {
  /** False when the delete was skipped (see skippedReason). */
  deleted: boolean;
  /** Set when the registry needed a digest delete and it was skipped. */
  skippedReason?: string;
}

/** The OCI distribution client; see module doc. */
export class OciRegistry implements Registry {
  /** OCI_REGISTRY split into registry host and repository prefix. */
  readonly base: RegistryBase;
  readonly #session: RegistrySession;

  /** Prefer {@link newOciRegistry}, which builds the session and its credentials. */
  constructor(base: RegistryBase, session: RegistrySession) {
    this.base = base;
    this.#session = session;
  }

  async hasManifest(name: string, reference: string, signal?: AbortSignal): Promise<boolean> {
    const repo = this.#repo(name, reference);
    return (await this.#head(repo, reference, signal)) !== undefined;
  }

  async deleteManifest(name: string, reference: string, signal?: AbortSignal): Promise<void> {
    await this.deleteManifestWithOutcome(name, reference, signal);
  }

  /** deleteManifest, also telling whether anything was deleted or why it was skipped. */
  async deleteManifestWithOutcome(
    name: string,
    reference: string,
    signal?: AbortSignal,
  ): Promise<DeleteOutcome> {
    const repo = this.#repo(name, reference);
    const action = `delete manifest ${formatRef(repo, reference)}`;
    const res = await this.#delete(repo, reference, action, signal);
    if (res.status === 200 || res.status === 202) return { deleted: true };
    if (res.status === 404) return { deleted: false };
    const err = toError(action, res);
    if (isDigest(reference) || !refusesTagDelete(err)) throw err;

    // The registry only deletes by digest: resolve the tag, and spare a digest the sibling
    // tag still needs.
    const digest = await this.#head(repo, reference, signal);
    if (digest === undefined) return { deleted: false };
    const sibling = siblingTag(reference);
    if (sibling !== undefined) {
      const siblingDigest = await this.#head(repo, sibling, signal);
      if (siblingDigest === digest) {
        const reason =
          `${formatRef(repo, reference)} and ${formatRef(repo, sibling)} share ${digest}; ` +
          `the registry cannot delete a tag alone, and deleting the digest would remove ${sibling}`;
        logger.warn("skipping delete of {ref}: {reason}", {
          ref: formatRef(repo, reference),
          reason,
        });
        return { deleted: false, skippedReason: reason };
      }
    }
    const byDigest = await this.#delete(repo, digest, `${action} (by digest ${digest})`, signal);
    if (byDigest.status === 200 || byDigest.status === 202 || byDigest.status === 404) {
      logger.debug("deleted {ref} by digest {digest}", { ref: formatRef(repo, reference), digest });
      return { deleted: byDigest.status !== 404 };
    }
    throw toError(`${action} (by digest ${digest})`, byDigest);
  }

  #repo(name: string, reference: string): string {
    const repo = repositoryFor(this.base, name);
    checkReference(repo, reference);
    return repo;
  }

  /** HEADs a manifest: its digest when present, undefined on 404, throws otherwise. */
  async #head(repo: string, reference: string, signal?: AbortSignal): Promise<string | undefined> {
    const action = `HEAD manifest ${formatRef(repo, reference)}`;
    const res = await this.#readManifest("HEAD", repo, reference, action, signal);
    if (res.status === 404) return undefined;
    if (res.status !== 200) {
      // HEAD answers carry no body: ask again with GET to learn the registry's error code.
      throw await this.#detailedError(action, repo, reference, res, signal);
    }
    const digest = res.headers.get("docker-content-digest");
    if (!digest) {
      if (isDigest(reference)) return reference;
      throw new Error(`${action}: response did not include Docker-Content-Digest header`);
    }
    // The digest goes into a DELETE path: it must be a digest, not a path (as ggcr's NewHash).
    if (!isValidDigest(digest)) {
      throw new Error(`${action}: invalid Docker-Content-Digest ${JSON.stringify(digest)}`);
    }
    return digest;
  }

  /** A pull-scoped manifest read (HEAD to probe, GET to learn an error's detail). */
  #readManifest(
    method: "HEAD" | "GET",
    repo: string,
    reference: string,
    action: string,
    signal?: AbortSignal,
  ) {
    return this.#session.send({
      method,
      path: `/v2/${repo}/manifests/${reference}`,
      headers: { Accept: MANIFEST_ACCEPT },
      scopes: [`repository:${repo}:pull`],
      target: { registry: this.base.registry, repository: repo },
      action,
    }, signal);
  }

  #delete(repo: string, reference: string, action: string, signal?: AbortSignal) {
    return this.#session.send({
      method: "DELETE",
      path: `/v2/${repo}/manifests/${reference}`,
      scopes: [`repository:${repo}:push,pull,delete`],
      target: { registry: this.base.registry, repository: repo },
      action,
    }, signal);
  }

  async #detailedError(
    action: string,
    repo: string,
    reference: string,
    head: HttpResult,
    signal?: AbortSignal,
  ): Promise<RegistryError> {
    try {
      const res = await this.#readManifest("GET", repo, reference, action, signal);
      if (res.status === head.status) return toError(action, res);
    } catch {
      // The detail request is best effort; report the HEAD status below.
    }
    return toError(action, head);
  }
}

/**
 * Builds the registry client from OCI_REGISTRY. Credentials: Google ADC for Google hosts, then the
 * Docker config, then anonymous (the Go operator's MultiKeychain(google, default)).
 */
export function newOciRegistry(base: string, opts: OciRegistryOptions = {}): OciRegistry {
  const parsed = parseRegistryBase(base);
  const env: EnvGetter = typeof opts.env === "function"
    ? opts.env
    : opts.env
    ? envFrom(opts.env)
    : processEnv;
  const readTextFile = opts.readTextFile ?? readFile;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new Error(`timeoutMs must be positive, got ${timeoutMs}`);
  const keychain = opts.keychain ?? chainKeychains(
    googleKeychain({ env, readTextFile, fetch: opts.fetch, timeoutMs, now: opts.now }),
    dockerConfigKeychain({ env, readTextFile }),
  );
  const session = new RegistrySession({
    registry: parsed.registry,
    keychain,
    // Looked up per call, so the allow-list main.ts installs later (kube/net_guard.ts) applies.
    fetch: opts.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    timeoutMs,
    now: opts.now,
    plainHttpHosts: opts.plainHttpHosts,
  });
  return new OciRegistry(parsed, session);
}

/**
 * The registry client from the process environment: OCI_REGISTRY is mandatory (the operator
 * refuses to start without it).
 */
export function buildRegistry(opts: OciRegistryOptions = {}): OciRegistry {
  const env: EnvGetter = typeof opts.env === "function"
    ? opts.env
    : opts.env
    ? envFrom(opts.env)
    : processEnv;
  const base = env("OCI_REGISTRY");
  if (!base) throw new Error("OCI_REGISTRY must be set");
  return newOciRegistry(base, { ...opts, env });
}

/** The other tag of the pair we keep per VM, if reference is one of them. */
function siblingTag(reference: string): string | undefined {
  if (reference === HIBERNATE_SNAPSHOT_TAG) return DEFAULT_SNAPSHOT_TAG;
  if (reference === DEFAULT_SNAPSHOT_TAG) return HIBERNATE_SNAPSHOT_TAG;
  return undefined;
}

/** Whether err is a registry refusing to delete by tag (it wants a digest). */
function refusesTagDelete(err: RegistryError): boolean {
  if (err.status === 405) return true;
  const codes = err.diagnostics.map((d) => d.code);
  if (codes.includes("UNSUPPORTED")) return true;
  return err.status === 400 && codes.includes("DIGEST_INVALID");
}

function toError(action: string, res: HttpResult): RegistryError {
  return new RegistryError(
    action,
    res.status,
    res.statusText,
    parseDiagnostics(res.body),
    res.body,
  );
}
