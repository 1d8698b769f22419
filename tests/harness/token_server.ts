/**
 * A small token server for distribution's `auth.token` mode (tests only). It checks Basic
 * credentials (or an OAuth2 refresh token it issued), grants every action asked in the `scope`
 * parameters, and signs RS256 JWTs whose `x5c` header carries a self-signed certificate that the
 * registry trusts through `rootcertbundle`. Requests are recorded so tests can assert scopes and
 * token reuse.
 */

import { fromBase64url, importRs256Key, signRs256 } from "../../snapshot/auth/jwt.ts";

/** One token request as the server saw it. */
export interface TokenRequest {
  method: string;
  user: string | undefined;
  scopes: string[];
  service: string;
  grantType: string;
}

/** A running token server. */
export interface TokenServer {
  /** Realm URL to give the registry (uses `localhost`: ggcr rejects loopback IP realms). */
  realm: string;
  service: string;
  issuer: string;
  /** PEM certificate file for the registry's rootcertbundle. */
  certPath: string;
  requests: TokenRequest[];
  /** A refresh token the server accepts (for docker config `identitytoken` tests). */
  refreshToken: string;
  /** Lifetime (s) stated in responses; undefined omits expires_in. */
  expiresIn: number | undefined;
  /** Signs a token for the given scopes directly (for harness pushes). */
  issue(scopes: string[]): Promise<string>;
  close(): Promise<void>;
}

/** Options of the token server. */
export interface TokenServerOptions {
  dir: string;
  users: Record<string, string>;
  expiresIn?: number;
}

/** Starts the token server on 127.0.0.1 with a fresh key pair made by the openssl CLI. */
export async function startTokenServer(opts: TokenServerOptions): Promise<TokenServer> {
  const keyPath = `${opts.dir}/token-key.pem`;
  const certPath = `${opts.dir}/token-cert.pem`;
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      keyPath,
      "-out",
      certPath,
      "-days",
      "2",
      "-subj",
      "/CN=cocoon-test-token-issuer",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`openssl failed: ${new TextDecoder().decode(out.stderr)}`);
  const key = await importRs256Key(await Deno.readTextFile(keyPath));
  const certDer = pemBody(await Deno.readTextFile(certPath));

  const service = "cocoon-test-registry";
  const issuer = "cocoon-test-issuer";
  const refreshToken = `refresh-${crypto.randomUUID()}`;
  const requests: TokenRequest[] = [];
  const state = { expiresIn: opts.expiresIn as number | undefined };

  const issue = (scopes: string[]) => {
    const now = Math.floor(Date.now() / 1000);
    return signRs256({ typ: "JWT", x5c: [certDer] }, {
      iss: issuer,
      sub: "test",
      aud: service,
      exp: now + 300,
      nbf: now - 5,
      iat: now,
      jti: crypto.randomUUID(),
      access: scopes.map(parseScope).filter((a) => a !== undefined),
    }, key);
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (url.pathname !== "/token") return new Response("not found", { status: 404 });
    let user: string | undefined;
    let scopes: string[];
    let svc: string;
    let grantType = "basic";
    if (req.method === "POST") {
      const form = new URLSearchParams(await req.text());
      grantType = form.get("grant_type") ?? "";
      scopes = (form.get("scope") ?? "").split(" ").filter(Boolean);
      svc = form.get("service") ?? "";
      if (grantType !== "refresh_token" || form.get("refresh_token") !== refreshToken) {
        requests.push({ method: "POST", user, scopes, service: svc, grantType });
        return Response.json({ error: "invalid_grant" }, { status: 401 });
      }
      user = "refresh-token-user";
    } else {
      scopes = url.searchParams.getAll("scope");
      svc = url.searchParams.get("service") ?? "";
      const basic = parseBasic(req.headers.get("authorization"));
      if (!basic || opts.users[basic.user] !== basic.password) {
        requests.push({ method: "GET", user: basic?.user, scopes, service: svc, grantType });
        return Response.json(
          { errors: [{ code: "UNAUTHORIZED", message: "invalid username or password" }] },
          { status: 401 },
        );
      }
      user = basic.user;
    }
    requests.push({ method: req.method, user, scopes, service: svc, grantType });
    const body: Record<string, unknown> = { token: await issue(scopes) };
    if (state.expiresIn !== undefined) body.expires_in = state.expiresIn;
    if (grantType === "refresh_token") body.refresh_token = refreshToken;
    return Response.json(body);
  });
  const port = server.addr.port;
  return {
    realm: `http://localhost:${port}/token`,
    service,
    issuer,
    certPath,
    requests,
    refreshToken,
    get expiresIn() {
      return state.expiresIn;
    },
    set expiresIn(v: number | undefined) {
      state.expiresIn = v;
    },
    issue,
    close: () => server.shutdown(),
  };
}

function parseScope(scope: string): { type: string; name: string; actions: string[] } | undefined {
  const first = scope.indexOf(":");
  const last = scope.lastIndexOf(":");
  if (first < 0 || last <= first) return undefined;
  return {
    type: scope.slice(0, first),
    name: scope.slice(first + 1, last),
    actions: scope.slice(last + 1).split(",").filter(Boolean),
  };
}

function parseBasic(header: string | null): { user: string; password: string } | undefined {
  const m = /^Basic\s+(.+)$/i.exec(header ?? "");
  if (!m) return undefined;
  const text = new TextDecoder().decode(fromBase64url(m[1].replace(/=+$/, "")));
  const colon = text.indexOf(":");
  return colon < 0 ? undefined : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

function pemBody(pem: string): string {
  const m = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(pem);
  if (!m) throw new Error("no certificate in PEM");
  return m[1].replace(/\s+/g, "");
}
