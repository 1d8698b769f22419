import assert from "node:assert/strict";
import {
  allowsPlainHttp,
  checkReference,
  formatRef,
  parseRegistryBase,
  repositoryFor,
} from "./reference.ts";

Deno.test("parseRegistryBase splits host and prefix like go-containerregistry", () => {
  assert.deepEqual(parseRegistryBase("asia-docker.pkg.dev/proj/repo"), {
    registry: "asia-docker.pkg.dev",
    prefix: "proj/repo",
  });
  assert.deepEqual(parseRegistryBase("127.0.0.1:5000/snap"), {
    registry: "127.0.0.1:5000",
    prefix: "snap",
  });
  assert.deepEqual(parseRegistryBase("localhost/snap"), { registry: "localhost", prefix: "snap" });
  assert.deepEqual(parseRegistryBase("registry.example.com"), {
    registry: "registry.example.com",
    prefix: "",
  });
  assert.deepEqual(parseRegistryBase("[::1]:5000/x"), { registry: "[::1]:5000", prefix: "x" });
  // No dot, colon or "localhost" in the first element: a Docker Hub path.
  assert.deepEqual(parseRegistryBase("myorg/snapshots"), {
    registry: "index.docker.io",
    prefix: "myorg/snapshots",
  });
  assert.deepEqual(parseRegistryBase("docker.io/myorg"), {
    registry: "index.docker.io",
    prefix: "myorg",
  });
});

Deno.test("parseRegistryBase rejects malformed OCI_REGISTRY values with a clear message", () => {
  const cases: Array<[string, RegExp]> = [
    ["", /must not be empty/],
    ["http://registry.example.com/x", /without a scheme/],
    ["https://registry.example.com", /without a scheme/],
    ["registry.example.com/a b", /whitespace/],
    [" registry.example.com", /whitespace/],
    ["registry.example.com/", /empty path elements/],
    ["registry.example.com//x", /empty path elements/],
    ["registry.example.com/Proj", /lowercase/],
    ["registry.example.com:99999/x", /out of range/],
    ["bad_host.example.com:/x", /registry host/],
    ["registry.example.com/x@sha256:abc", /'@'/],
  ];
  for (const [value, want] of cases) {
    assert.throws(() => parseRegistryBase(value), (err: Error) => {
      assert.match(err.message, /invalid OCI_REGISTRY/);
      assert.match(err.message, want, value);
      return true;
    });
  }
});

Deno.test("repositoryFor appends the VM name and validates it", () => {
  assert.equal(
    repositoryFor(parseRegistryBase("r.example.com/p/q"), "vk-ns-demo-0"),
    "p/q/vk-ns-demo-0",
  );
  assert.equal(repositoryFor(parseRegistryBase("r.example.com"), "vk-ns-demo-0"), "vk-ns-demo-0");
  assert.equal(repositoryFor(parseRegistryBase("docker.io"), "vm"), "library/vm");
  assert.throws(
    () => repositoryFor(parseRegistryBase("r.example.com/p"), "VM"),
    /invalid repository/,
  );
  assert.throws(
    () => repositoryFor(parseRegistryBase("r.example.com/p"), "a/b"),
    /invalid repository/,
  );
  assert.throws(
    () => repositoryFor(parseRegistryBase("r.example.com/p"), ""),
    /invalid repository/,
  );
  assert.throws(() => repositoryFor(parseRegistryBase("r.example.com"), "v"), /2 to 255/);
});

Deno.test("checkReference accepts tags and digests and formatRef joins them", () => {
  checkReference("p/vm", "hibernate");
  checkReference("p/vm", `sha256:${"a".repeat(64)}`);
  assert.throws(() => checkReference("p/vm", ""), /invalid tag/);
  assert.throws(() => checkReference("p/vm", "a/b"), /invalid tag/);
  assert.throws(() => checkReference("p/vm", "sha256:"), /invalid digest/);
  assert.equal(formatRef("p/vm", "latest"), "p/vm:latest");
  assert.equal(formatRef("p/vm", "sha256:ab"), "p/vm@sha256:ab");
});

Deno.test("allowsPlainHttp ports name.Registry.Scheme(), quirks included", () => {
  for (
    const host of [
      "localhost:5000",
      "registry.localhost",
      "registry.localhost:5000",
      "127.0.0.1",
      "127.0.0.1:5000",
      "::1",
      "[::1]:5000",
      "[::1]",
      "10.1.2.3:5000",
      "172.16.0.1",
      "172.31.9.9:80",
      "192.168.0.10:5000",
    ]
  ) {
    assert.equal(allowsPlainHttp(host), true, host);
  }
  // Bare "localhost", other loopback addresses and public hosts are https-only in ggcr too.
  for (
    const host of [
      "localhost",
      "127.0.0.2:5000",
      "172.32.0.1",
      "8.8.8.8:5000",
      "gcr.io",
      "registry.example.com:5000",
      "[::2]:5000",
    ]
  ) {
    assert.equal(allowsPlainHttp(host), false, host);
  }
});
