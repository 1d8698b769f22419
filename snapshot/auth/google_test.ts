import assert from "node:assert/strict";
import { chainKeychains } from "./keychain.ts";
import { dockerConfigKeychain } from "./docker_config.ts";
import { envFrom, type TextFileReader } from "./env.ts";
import { fromBase64url } from "./jwt.ts";
import {
  CLOUD_PLATFORM_SCOPE,
  detectGce,
  findDefaultCredentials,
  googleKeychain,
} from "./google.ts";
import { isGoogleHost } from "./google_endpoints.ts";

const NOW_MS = 1_800_000_000_000;

function files(map: Record<string, string>): TextFileReader {
  return (p) =>
    map[p] !== undefined ? Promise.resolve(map[p]) : Promise.reject(new Deno.errors.NotFound(p));
}

async function serviceAccountKey(tokenUri: string) {
  const kp = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  const der = new Uint8Array(await crypto.subtle.exportKey("pkcs8", kp.privateKey));
  const pem = `-----BEGIN PRIVATE KEY-----\n${
    btoa(String.fromCharCode(...der))
  }\n-----END PRIVATE KEY-----\n`;
  return {
    publicKey: kp.publicKey,
    json: JSON.stringify({
      type: "service_account",
      project_id: "proj",
      private_key_id: "key-id-1",
      private_key: pem,
      client_email: "robot@proj.iam.gserviceaccount.com",
      token_uri: tokenUri,
    }),
  };
}

/** A loopback stand-in for an OAuth2 / metadata endpoint; handler errors become 400s. */
function standIn(handler: (req: Request, body: string) => Promise<Response> | Response) {
  const seen: Array<{ path: string; error?: string }> = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = await req.text();
    try {
      const res = await handler(req, body);
      seen.push({ path: url.pathname + url.search });
      return res;
    } catch (err) {
      seen.push({ path: url.pathname, error: String(err) });
      return Response.json({ error: "invalid_request", error_description: String(err) }, {
        status: 400,
      });
    }
  });
  return { host: `127.0.0.1:${server.addr.port}`, seen, close: () => server.shutdown() };
}

Deno.test("isGoogleHost matches go-containerregistry's host test exactly", () => {
  for (
    const h of [
      "gcr.io",
      "us.gcr.io",
      "eu.gcr.io",
      "asia-docker.pkg.dev",
      "us-central1-docker.pkg.dev",
      "x.google.com",
    ]
  ) {
    assert.equal(isGoogleHost(h), true, h);
  }
  for (
    const h of [
      "pkg.dev",
      "google.com",
      "gcr.io.evil.com",
      "evilgcr.io",
      "127.0.0.1:5000",
      "docker.io",
      "gcr.io:443",
    ]
  ) {
    assert.equal(isGoogleHost(h), false, h);
  }
});

Deno.test("service-account ADC: RS256 assertion with the right claims is exchanged for a token", async () => {
  let publicKey!: CryptoKey;
  const server = standIn(async (req, body) => {
    assert.equal(req.method, "POST");
    assert.equal(req.headers.get("content-type"), "application/x-www-form-urlencoded");
    const form = new URLSearchParams(body);
    assert.equal(form.get("grant_type"), "urn:ietf:params:oauth:grant-type:jwt-bearer");
    const [h, c, s] = (form.get("assertion") ?? "").split(".");
    const header = JSON.parse(new TextDecoder().decode(fromBase64url(h)));
    const claims = JSON.parse(new TextDecoder().decode(fromBase64url(c)));
    assert.deepEqual(header, { typ: "JWT", kid: "key-id-1", alg: "RS256" });
    assert.equal(claims.iss, "robot@proj.iam.gserviceaccount.com");
    assert.equal(claims.scope, CLOUD_PLATFORM_SCOPE);
    assert.equal(claims.aud, `http://${server.host}/token`);
    assert.equal(claims.iat, Math.floor(NOW_MS / 1000) - 10);
    assert.equal(claims.exp, claims.iat + 3600);
    const valid = await crypto.subtle.verify(
      "RSASSA-PKCS1-v1_5",
      publicKey,
      fromBase64url(s),
      new TextEncoder().encode(`${h}.${c}`),
    );
    assert.ok(valid, "signature must verify with the key's public half");
    return Response.json({ access_token: "ya29.sa-token", expires_in: 3599, token_type: "Bearer" });
  });
  try {
    const key = await serviceAccountKey(`http://${server.host}/token`);
    publicKey = key.publicKey;
    const env = envFrom({ GOOGLE_APPLICATION_CREDENTIALS: "/secrets/sa.json", HOME: "/h" });
    const found = await findDefaultCredentials({
      env,
      readTextFile: files({ "/secrets/sa.json": key.json }),
      now: () => NOW_MS,
      onGce: () => assert.fail("metadata must not be consulted when a key file is named"),
    });
    assert.equal(found?.source, "google-adc-file");
    const tok = await found!.tokens.token();
    assert.equal(tok.accessToken, "ya29.sa-token");
    assert.equal(tok.expiresAt, NOW_MS + 3_599_000);
    assert.deepEqual(server.seen.map((s) => s.error), [undefined]);
  } finally {
    await server.close();
  }
});

Deno.test("authorized_user ADC (gcloud well-known file) redeems the refresh token", async () => {
  const server = standIn((_req, body) => {
    const form = new URLSearchParams(body);
    assert.equal(form.get("grant_type"), "refresh_token");
    assert.equal(form.get("refresh_token"), "1//refresh");
    assert.equal(form.get("client_id"), "cid.apps.googleusercontent.com");
    assert.equal(form.get("client_secret"), "csecret");
    return Response.json({ access_token: "ya29.user-token", expires_in: 3600 });
  });
  try {
    const json = JSON.stringify({
      type: "authorized_user",
      client_id: "cid.apps.googleusercontent.com",
      client_secret: "csecret",
      refresh_token: "1//refresh",
      token_uri: `http://${server.host}/token`,
    });
    const found = await findDefaultCredentials({
      env: envFrom({ HOME: "/h" }),
      readTextFile: files({ "/h/.config/gcloud/application_default_credentials.json": json }),
      onGce: () => Promise.resolve(false),
    });
    assert.equal(found?.source, "google-adc-gcloud");
    assert.equal((await found!.tokens.token()).accessToken, "ya29.user-token");
  } finally {
    await server.close();
  }
});

Deno.test("metadata server: GCE_METADATA_HOST is honoured and Metadata-Flavor is sent", async () => {
  const server = standIn((req) => {
    const url = new URL(req.url);
    assert.equal(req.headers.get("metadata-flavor"), "Google");
    assert.equal(url.pathname, "/computeMetadata/v1/instance/service-accounts/default/token");
    assert.equal(url.searchParams.get("scopes"), CLOUD_PLATFORM_SCOPE);
    return Response.json({
      access_token: "ya29.gce-token",
      expires_in: 1800,
      token_type: "Bearer",
    });
  });
  try {
    const env = envFrom({ GCE_METADATA_HOST: server.host });
    assert.equal(await detectGce(env), true);
    const found = await findDefaultCredentials({ env, readTextFile: files({}) });
    assert.equal(found?.source, "google-metadata");
    assert.equal((await found!.tokens.token()).accessToken, "ya29.gce-token");
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

Deno.test("GCE detection probes the metadata root for Metadata-Flavor: Google", async () => {
  const answers = [new Headers({ "Metadata-Flavor": "Google" }), new Headers()];
  const urls: string[] = [];
  const fakeFetch = (u: string | URL | Request) => {
    urls.push(String(u));
    return Promise.resolve(new Response("", { headers: answers.shift() }));
  };
  assert.equal(await detectGce(envFrom({}), { fetch: fakeFetch }), true);
  assert.equal(await detectGce(envFrom({}), { fetch: fakeFetch }), false);
  assert.equal(
    await detectGce(envFrom({}), { fetch: () => Promise.reject(new TypeError("no route")) }),
    false,
  );
  assert.deepEqual(urls, ["http://169.254.169.254", "http://169.254.169.254"]);
});

Deno.test("no ADC anywhere and not on GCE: no Google credentials", async () => {
  assert.equal(
    await findDefaultCredentials({
      env: envFrom({ HOME: "/h" }),
      readTextFile: files({}),
      onGce: () => Promise.resolve(false),
    }),
    undefined,
  );
  await assert.rejects(
    findDefaultCredentials({
      env: envFrom({ GOOGLE_APPLICATION_CREDENTIALS: "/missing.json" }),
      readTextFile: files({}),
    }),
    /cannot read GOOGLE_APPLICATION_CREDENTIALS file \/missing\.json/,
  );
});

Deno.test("keychain: Google credentials only for Google hosts, Docker config for the rest", async () => {
  let tokenCalls = 0;
  const server = standIn(() => {
    tokenCalls++;
    return Response.json({ access_token: "ya29.gce-token", expires_in: 1800 });
  });
  try {
    const env = envFrom({ GCE_METADATA_HOST: server.host, HOME: "/h" });
    const readTextFile = files({
      "/h/.docker/config.json": JSON.stringify({
        auths: {
          "127.0.0.1:5000": { auth: btoa("local:pw") },
          "us-docker.pkg.dev": { auth: btoa("docker-cfg:pw") },
        },
      }),
    });
    const kc = chainKeychains(
      googleKeychain({ env, readTextFile }),
      dockerConfigKeychain({ env, readTextFile }),
    );
    const google = await kc.resolve({ registry: "us-docker.pkg.dev", repository: "proj/repo/vm" });
    assert.equal(google?.source, "google-metadata");
    assert.deepEqual(await google!.authorization(), {
      username: "_token",
      password: "ya29.gce-token",
    });
    const local = await kc.resolve({ registry: "127.0.0.1:5000", repository: "snap/vm" });
    assert.equal(local?.source, "docker-config");
    assert.equal((await local!.authorization()).username, "local");
    // Resolved once and the token reused (not re-fetched per call or per host).
    await kc.resolve({ registry: "gcr.io", repository: "proj/vm" });
    await google!.authorization();
    assert.equal(tokenCalls, 1);
  } finally {
    await server.close();
  }
});

Deno.test("keychain: a failed Google resolution falls through and is retried later", async () => {
  let now = 0;
  let reads = 0;
  const kc = googleKeychain({
    env: envFrom({ GOOGLE_APPLICATION_CREDENTIALS: "/bad.json" }),
    readTextFile: () => {
      reads++;
      return Promise.resolve("{not json");
    },
    now: () => now,
    retryAfterFailureMs: 30_000,
  });
  const t = { registry: "gcr.io", repository: "p/vm" };
  assert.equal(await kc.resolve(t), undefined);
  assert.equal(await kc.resolve(t), undefined);
  assert.equal(reads, 1);
  now = 30_001;
  assert.equal(await kc.resolve(t), undefined);
  assert.equal(reads, 2);
});
