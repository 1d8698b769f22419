import assert from "node:assert/strict";
import {
  dockerConfigKeychain,
  hostOf,
  loadDockerConfig,
  lookupCredential,
  parseDockerConfig,
} from "./docker_config.ts";
import { envFrom, type TextFileReader } from "./env.ts";

function files(map: Record<string, unknown>): TextFileReader {
  return (path) => {
    const v = map[path];
    if (v === undefined) return Promise.reject(new Deno.errors.NotFound(path));
    return Promise.resolve(typeof v === "string" ? v : JSON.stringify(v));
  };
}

const b64 = (s: string) => btoa(s);

Deno.test("docker config: auth field decodes to user:pass and wins over username/password", () => {
  const cfg = parseDockerConfig(
    "c.json",
    JSON.stringify({
      auths: {
        "r.example.com": { auth: b64("u:p:with:colons"), username: "ignored", password: "ignored" },
        "s.example.com": { username: "su", password: "sp" },
        "t.example.com": { identitytoken: "idt" },
        "v.example.com": { registrytoken: "rt" },
      },
    }),
  );
  const get = (registry: string) => lookupCredential(cfg, { registry, repository: "p/vm" });
  assert.deepEqual({ ...get("r.example.com") }, {
    username: "u",
    password: "p:with:colons",
    identityToken: undefined,
    registryToken: undefined,
  });
  assert.equal(get("s.example.com")?.password, "sp");
  assert.equal(get("t.example.com")?.identityToken, "idt");
  assert.equal(get("v.example.com")?.registryToken, "rt");
  assert.equal(get("w.example.com"), undefined);
});

Deno.test("docker config: keys match exactly, by repository, and in legacy URL forms", () => {
  const cfg = parseDockerConfig(
    "c.json",
    JSON.stringify({
      auths: {
        "https://index.docker.io/v1/": { auth: b64("hub:1") },
        "http://legacy.example.com:5000/v1/": { auth: b64("legacy:1") },
        "r.example.com/p/vm": { auth: b64("repo:1") },
        "r.example.com": { auth: b64("host:1") },
      },
    }),
  );
  const user = (registry: string, repository = "p/vm") =>
    lookupCredential(cfg, { registry, repository })?.username;
  assert.equal(user("index.docker.io", "library/vm"), "hub");
  assert.equal(user("legacy.example.com:5000"), "legacy");
  assert.equal(user("r.example.com"), "repo");
  assert.equal(user("r.example.com", "p/other"), "host");
  assert.equal(hostOf("https://x.example.com:8443/v1/"), "x.example.com:8443");
  assert.equal(hostOf("x.example.com/path"), "x.example.com");
  // As docker/cli's ConvertToHostname: the port is kept as written (even a default one), and
  // user info is dropped.
  assert.equal(hostOf("https://x.example.com:443/v1/"), "x.example.com:443");
  assert.equal(hostOf("http://u:p@x.example.com:5000"), "x.example.com:5000");
  assert.equal(hostOf("https://[::1]:5000/v1/"), "[::1]:5000");
  const withPort = parseDockerConfig(
    "c.json",
    JSON.stringify({ auths: { "https://p.example.com:443/v1/": { auth: b64("port:1") } } }),
  );
  assert.equal(
    lookupCredential(withPort, { registry: "p.example.com:443", repository: "p/vm" })?.username,
    "port",
  );
});

Deno.test("docker config: a malformed auth field or file is an error that names no secret", () => {
  assert.throws(
    () =>
      parseDockerConfig(
        "c.json",
        JSON.stringify({ auths: { r: { auth: b64("nocolon-SECRET") } } }),
      ),
    (e: Error) => /invalid "auth" for r/.test(e.message) && !e.message.includes("SECRET"),
  );
  assert.throws(() => parseDockerConfig("c.json", "{nope"), /not valid JSON/);
  assert.deepEqual(parseDockerConfig("c.json", "").auths.size, 0);
});

Deno.test("docker config location: HOME first, DOCKER_CONFIG when set, then Podman files", async () => {
  const home = { auths: { "r.example.com": { auth: b64("home:1") } } };
  const dc = { auths: { "r.example.com": { auth: b64("dc:1") } } };
  const podman = { auths: { "r.example.com": { auth: b64("podman:1") } } };
  const user = async (env: Record<string, string>, fs: Record<string, unknown>) => {
    const cfg = await loadDockerConfig(envFrom(env), files(fs));
    return cfg &&
      lookupCredential(cfg, { registry: "r.example.com", repository: "p/vm" })?.username;
  };
  assert.equal(await user({ HOME: "/h" }, { "/h/.docker/config.json": home }), "home");
  // DOCKER_CONFIG set: its file is the one loaded, even when the home file exists.
  assert.equal(
    await user({ HOME: "/h", DOCKER_CONFIG: "/d" }, {
      "/h/.docker/config.json": home,
      "/d/config.json": dc,
    }),
    "dc",
  );
  assert.equal(await user({ HOME: "/h", DOCKER_CONFIG: "/d" }, { "/d/config.json": dc }), "dc");
  assert.equal(
    await user({ HOME: "/h", DOCKER_CONFIG: "/d" }, { "/h/.docker/config.json": home }),
    undefined,
  );
  assert.equal(
    await user({ HOME: "/h", REGISTRY_AUTH_FILE: "/p.json" }, { "/p.json": podman }),
    "podman",
  );
  assert.equal(
    await user({ XDG_RUNTIME_DIR: "/run/u" }, { "/run/u/containers/auth.json": podman }),
    "podman",
  );
  assert.equal(await user({ HOME: "/h" }, {}), undefined);
});

Deno.test("dockerConfigKeychain resolves an authenticator or nothing", async () => {
  const kc = dockerConfigKeychain({
    env: envFrom({ HOME: "/h" }),
    readTextFile: files({
      "/h/.docker/config.json": {
        auths: { "r.example.com": { username: "u", password: "p" } },
        credsStore: "desktop",
      },
    }),
  });
  const auth = await kc.resolve({ registry: "r.example.com", repository: "p/vm" });
  assert.equal(auth?.source, "docker-config");
  assert.deepEqual(await auth?.authorization(), {
    username: "u",
    password: "p",
    identityToken: undefined,
    registryToken: undefined,
  });
  assert.equal(await kc.resolve({ registry: "other.example.com", repository: "p/vm" }), undefined);
});
