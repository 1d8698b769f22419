/**
 * Test double for the simulator's unit tests: an in-process OCI registry on 127.0.0.1 that
 * accepts what sim/oci_push.ts sends (blob upload, manifest PUT by tag, manifest GET / HEAD,
 * tag list) and keeps everything in memory. The integration test uses the real registry
 * (tests/harness/registry.ts) instead.
 *
 * @module
 */
import { sha256Digest } from "../oci_push.ts";

/** One request the stub answered. */
export interface OciStubRequest {
  method: string;
  path: string;
}

/** A running stub registry. */
export interface OciStub {
  /** `127.0.0.1:<port>`, usable as the simulator's registry address. */
  host: string;
  requests: OciStubRequest[];
  /** When true every manifest PUT answers 500 (a registry outage for pushes). */
  failPushes: boolean;
  /** Tags of repo, sorted. */
  tagsOf(repo: string): string[];
  /** The config blob behind repo:tag, as text; undefined when the tag is absent. */
  contentOf(repo: string, tag: string): string | undefined;
  /** The manifest digest behind repo:tag. */
  digestOf(repo: string, tag: string): string | undefined;
  /** Stores repo:tag with the given config content, as if something else had pushed it. */
  put(repo: string, tag: string, content: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts the stub registry. */
export function startOciStub(): OciStub {
  const blobs = new Map<string, Uint8Array>();
  /** digest → manifest bytes. */
  const manifests = new Map<string, string>();
  /** repo → tag → manifest digest. */
  const tags = new Map<string, Map<string, string>>();
  const requests: OciStubRequest[] = [];
  let uploads = 0;

  const tagMap = (repo: string) => {
    let m = tags.get(repo);
    if (!m) tags.set(repo, m = new Map());
    return m;
  };
  const putManifest = async (repo: string, tag: string, body: string) => {
    const digest = await sha256Digest(new TextEncoder().encode(body));
    manifests.set(digest, body);
    tagMap(repo).set(tag, digest);
    return digest;
  };
  const unknown = () =>
    Response.json({ errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }] }, {
      status: 404,
    });

  const stub: OciStub = {
    host: "",
    requests,
    failPushes: false,
    tagsOf: (repo) => [...(tags.get(repo)?.keys() ?? [])].sort(),
    digestOf: (repo, tag) => tags.get(repo)?.get(tag),
    contentOf(repo, tag) {
      const digest = tags.get(repo)?.get(tag);
      if (!digest) return undefined;
      const manifest = JSON.parse(manifests.get(digest)!) as { config?: { digest?: string } };
      const blob = blobs.get(manifest.config?.digest ?? "");
      return blob ? new TextDecoder().decode(blob) : undefined;
    },
    async put(repo, tag, content) {
      const blob = new TextEncoder().encode(content);
      const digest = await sha256Digest(blob);
      blobs.set(digest, blob);
      await putManifest(repo, tag, JSON.stringify({ schemaVersion: 2, config: { digest } }));
    },
    close: () => server.shutdown(),
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    requests.push({ method: req.method, path: url.pathname });
    const body = new Uint8Array(await req.arrayBuffer());
    // The API version check every distribution client starts with.
    if (url.pathname === "/v2/" && req.method === "GET") return Response.json({});
    const upload = /^\/v2\/(.+)\/blobs\/uploads\/([^/]*)$/.exec(url.pathname);
    if (upload && req.method === "POST") {
      return new Response(null, {
        status: 202,
        headers: { Location: `/v2/${upload[1]}/blobs/uploads/u${++uploads}` },
      });
    }
    if (upload && req.method === "PUT") {
      const digest = url.searchParams.get("digest") ?? "";
      if (digest !== await sha256Digest(body)) {
        return Response.json({ errors: [{ code: "DIGEST_INVALID" }] }, { status: 400 });
      }
      blobs.set(digest, body);
      return new Response(null, { status: 201, headers: { "Docker-Content-Digest": digest } });
    }
    const m = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const [, repo, ref] = m;
      if (req.method === "PUT") {
        if (stub.failPushes) return new Response("injected push failure", { status: 500 });
        const text = new TextDecoder().decode(body);
        const config = (JSON.parse(text) as { config?: { digest?: string } }).config?.digest;
        if (!config || !blobs.has(config)) {
          return Response.json({ errors: [{ code: "MANIFEST_BLOB_UNKNOWN" }] }, { status: 400 });
        }
        const digest = await putManifest(repo, ref, text);
        return new Response(null, { status: 201, headers: { "Docker-Content-Digest": digest } });
      }
      const digest = ref.startsWith("sha256:") ? ref : tags.get(repo)?.get(ref);
      const manifest = digest ? manifests.get(digest) : undefined;
      if (req.method === "DELETE") {
        if (!manifest) return unknown();
        // By tag drops that tag; by digest drops every tag pointing at it (as distribution).
        const repoTags = tagMap(repo);
        for (const [tag, d] of [...repoTags]) {
          if (ref.startsWith("sha256:") ? d === digest : tag === ref) repoTags.delete(tag);
        }
        return new Response(null, { status: 202 });
      }
      if (req.method === "GET" || req.method === "HEAD") {
        if (!manifest) return unknown();
        return new Response(req.method === "GET" ? manifest : null, {
          status: 200,
          headers: { "Docker-Content-Digest": digest!, "Content-Type": "application/json" },
        });
      }
    }
    const list = /^\/v2\/(.+)\/tags\/list$/.exec(url.pathname);
    if (list && req.method === "GET") {
      return Response.json({ name: list[1], tags: stub.tagsOf(list[1]) });
    }
    return new Response("not found", { status: 404 });
  });
  stub.host = `127.0.0.1:${server.addr.port}`;
  return stub;
}
