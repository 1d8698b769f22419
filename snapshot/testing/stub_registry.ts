/**
 * Test helper: a scriptable stand-in for an OCI registry + token endpoint on 127.0.0.1, for unit
 * tests of the client's HTTP behaviour (scopes, headers, retries, fallbacks) without a real
 * registry. The real-registry tests live in tests/integration/registry_test.ts.
 */

/** One request the stub received. */
export interface StubRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  authorization: string | null;
  accept: string | null;
  body: string;
}

/** Behaviour switches of the stub. */
export interface StubOptions {
  /** "none": no auth; "basic": Basic user/pass; "bearer": tokens from /token. */
  auth: "none" | "basic" | "bearer";
  user?: string;
  password?: string;
  /** How DELETE by tag is answered. */
  tagDelete?: "allow" | "digest-invalid" | "unsupported";
  /** expires_in stated in token responses (undefined: omitted). */
  expiresIn?: number;
  /** Realm advertised in the Bearer challenge (default: this server's /token). */
  realm?: string;
  /** Answer before normal handling (return undefined to continue). */
  intercept?: (req: Request, url: URL) => Response | undefined | Promise<Response | undefined>;
}

/** A running stub. */
export interface StubRegistry {
  host: string;
  requests: StubRequest[];
  /** repo → tag → digest. */
  tags: Map<string, Map<string, string>>;
  /** Tokens the registry currently accepts (token → granted scopes). */
  validTokens: Map<string, string[]>;
  put(repo: string, tag: string, digest: string): void;
  close(): Promise<void>;
}

/** Starts the stub registry. */
export function startStubRegistry(opts: StubOptions): StubRegistry {
  const requests: StubRequest[] = [];
  const tags = new Map<string, Map<string, string>>();
  const validTokens = new Map<string, string[]>();
  let tokenSeq = 0;
  let realm = "";

  const challenge = (scope?: string): Response => {
    const h = opts.auth === "basic"
      ? 'Basic realm="stub"'
      : `Bearer realm="${realm}",service="stub"${scope ? `,scope="${scope}"` : ""}`;
    return Response.json(
      { errors: [{ code: "UNAUTHORIZED", message: "authentication required" }] },
      {
        status: 401,
        headers: { "WWW-Authenticate": h },
      },
    );
  };

  const authorized = (req: Request, scope?: string): boolean => {
    const h = req.headers.get("authorization") ?? "";
    if (opts.auth === "none") return true;
    if (opts.auth === "basic") return h === `Basic ${btoa(`${opts.user}:${opts.password}`)}`;
    const granted = validTokens.get(h.replace(/^Bearer /, ""));
    if (!granted) return false;
    if (!scope) return true;
    const [, name, action] = /^repository:(.+):([^:]+)$/.exec(scope) ?? [];
    return granted.some((g) => {
      const m = /^repository:(.+):([^:]+)$/.exec(g);
      return m !== null && m[1] === name && m[2].split(",").includes(action);
    });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = await req.text();
    requests.push({
      method: req.method,
      path: url.pathname,
      query: url.searchParams,
      authorization: req.headers.get("authorization"),
      accept: req.headers.get("accept"),
      body,
    });
    const intercepted = await opts.intercept?.(req, url);
    if (intercepted) return intercepted;

    if (url.pathname === "/token") {
      let scopes = url.searchParams.getAll("scope");
      if (req.method === "POST") {
        const form = new URLSearchParams(body);
        scopes = (form.get("scope") ?? "").split(" ").filter(Boolean);
      } else if (
        (req.headers.get("authorization") ?? "") !==
          `Basic ${btoa(`${opts.user}:${opts.password}`)}`
      ) {
        return Response.json({ errors: [{ code: "UNAUTHORIZED", message: "bad credentials" }] }, {
          status: 401,
        });
      }
      const token = `tok-${++tokenSeq}`;
      validTokens.set(token, scopes);
      const res: Record<string, unknown> = { token };
      if (opts.expiresIn !== undefined) res.expires_in = opts.expiresIn;
      return Response.json(res);
    }
    if (url.pathname === "/v2/") {
      return authorized(req) ? Response.json({}) : challenge();
    }
    const m = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (!m) return new Response("not found", { status: 404 });
    const [, repo, ref] = m;
    const action = req.method === "DELETE" ? "delete" : "pull";
    if (!authorized(req, `repository:${repo}:${action}`)) {
      return challenge(`repository:${repo}:${action}`);
    }
    const repoTags = tags.get(repo);
    const digest = ref.includes(":")
      ? ([...(repoTags?.values() ?? [])].includes(ref) ? ref : undefined)
      : repoTags?.get(ref);
    if (req.method === "HEAD" || req.method === "GET") {
      if (!digest) {
        return Response.json({
          errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }],
        }, {
          status: 404,
        });
      }
      return new Response(req.method === "GET" ? "{}" : null, {
        status: 200,
        headers: {
          "Docker-Content-Digest": digest,
          "Content-Type": "application/vnd.oci.image.manifest.v1+json",
        },
      });
    }
    if (req.method === "DELETE") {
      if (!ref.includes(":") && opts.tagDelete === "digest-invalid") {
        return Response.json({
          errors: [{
            code: "DIGEST_INVALID",
            message: "provided digest did not match uploaded content",
          }],
        }, { status: 400 });
      }
      if (!ref.includes(":") && opts.tagDelete === "unsupported") {
        return Response.json({
          errors: [{ code: "UNSUPPORTED", message: "The operation is unsupported." }],
        }, { status: 405 });
      }
      if (!digest) {
        return Response.json({
          errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }],
        }, {
          status: 404,
        });
      }
      if (ref.includes(":")) {
        for (const [t, d] of [...(repoTags?.entries() ?? [])]) if (d === ref) repoTags!.delete(t);
      } else {
        repoTags!.delete(ref);
      }
      return new Response(null, { status: 202 });
    }
    return new Response("method not allowed", { status: 405 });
  });
  const host = `127.0.0.1:${server.addr.port}`;
  realm = opts.realm ?? `http://${host}/token`;
  return {
    host,
    requests,
    tags,
    validTokens,
    put(repo, tag, digest) {
      let t = tags.get(repo);
      if (!t) tags.set(repo, t = new Map());
      t.set(tag, digest);
    },
    close: () => server.shutdown(),
  };
}
