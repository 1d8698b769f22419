import assert from "node:assert/strict";
import { isRestrictedIp, parseChallenges, pickChallenge, validateRealm } from "./challenge.ts";

Deno.test("parseChallenges reads a distribution Bearer challenge", () => {
  assert.deepEqual(
    parseChallenges(
      'Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:p/vm:pull"',
    ),
    [{
      scheme: "bearer",
      params: {
        realm: "https://auth.example.com/token",
        service: "registry.example.com",
        scope: "repository:p/vm:pull",
      },
    }],
  );
});

Deno.test("parseChallenges splits challenges fetch joined with commas", () => {
  const got = parseChallenges('Negotiate, Basic realm="basic-realm", Bearer realm="r",error="x"');
  assert.deepEqual(got, [
    { scheme: "negotiate", params: {} },
    { scheme: "basic", params: { realm: "basic-realm" } },
    { scheme: "bearer", params: { realm: "r", error: "x" } },
  ]);
  assert.equal(pickChallenge(got)?.scheme, "basic");
});

Deno.test("parseChallenges handles escapes, unquoted values and junk", () => {
  assert.deepEqual(parseChallenges('Basic Realm="a\\"b", charset=UTF-8'), [
    { scheme: "basic", params: { realm: 'a"b', charset: "UTF-8" } },
  ]);
  assert.deepEqual(parseChallenges(null), []);
  assert.deepEqual(parseChallenges(""), []);
  assert.equal(pickChallenge(parseChallenges("Negotiate"))?.scheme, "negotiate");
  assert.equal(pickChallenge([]), undefined);
});

Deno.test("validateRealm allows https, http only for insecure registries", () => {
  assert.equal(
    validateRealm("https://auth.example.com/t", "r.example.com", false).host,
    "auth.example.com",
  );
  assert.throws(
    () => validateRealm("http://auth.example.com/t", "r.example.com", false),
    /secure registry/,
  );
  assert.equal(validateRealm("http://localhost:9/t", "127.0.0.1:5000", true).host, "localhost:9");
  assert.throws(() => validateRealm("ftp://x/t", "r", true), /scheme "ftp"/);
  assert.throws(() => validateRealm("::", "r", true), /cannot parse/);
});

Deno.test("validateRealm rejects private IP literals unless they are the registry itself", () => {
  assert.throws(
    () => validateRealm("http://169.254.169.254/token", "10.0.0.1:5000", true),
    /private or link-local/,
  );
  assert.throws(() => validateRealm("http://127.0.0.1:9/t", "127.0.0.1:5000", true), /private/);
  assert.equal(validateRealm("http://127.0.0.1:5000/t", "127.0.0.1:5000", true).pathname, "/t");
  assert.throws(() => validateRealm("https://[::1]:8443/t", "r.example.com", false), /private/);
  assert.equal(validateRealm("https://8.8.8.8/t", "r.example.com", false).hostname, "8.8.8.8");
  // The registry's own host matches however its default port or case is written.
  assert.equal(validateRealm("https://10.0.0.5/t", "10.0.0.5:443", true).pathname, "/t");
  assert.equal(validateRealm("http://10.0.0.5/t", "10.0.0.5:80", true).pathname, "/t");
  assert.throws(() => validateRealm("https://10.0.0.5:8443/t", "10.0.0.5:443", true), /private/);
});

Deno.test("isRestrictedIp classifies like Go's net.IP predicates", () => {
  for (
    const ip of [
      "127.0.0.2",
      "10.1.2.3",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "0.0.0.0",
      "224.0.0.251",
      "::1",
      "::",
      "fe80::1",
      "fd00:ec2::254",
      "ff02::1",
      "::ffff:127.0.0.1",
      "[::1]",
    ]
  ) {
    assert.equal(isRestrictedIp(ip), true, ip);
  }
  for (
    const ip of [
      "8.8.8.8",
      "172.32.0.1",
      "192.169.0.1",
      "2001:db8::1",
      "localhost",
      "example.com",
      "224.0.1.1",
      "::ffff:8.8.8.8",
    ]
  ) {
    assert.equal(isRestrictedIp(ip), false, ip);
  }
});
