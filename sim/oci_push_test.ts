import assert from "node:assert/strict";
import { parseSimRegistryAddress, RegistryHttpError, SimRegistry } from "./oci_push.ts";
import { startOciStub } from "./testing/oci_stub.ts";

Deno.test("registry address: OCI_REGISTRY form, optional http://, loopback only", () => {
  assert.deepEqual(parseSimRegistryAddress("127.0.0.1:5000/cocoon/snapshots"), {
    origin: "http://127.0.0.1:5000",
    host: "127.0.0.1:5000",
    prefix: "cocoon/snapshots",
  });
  assert.deepEqual(parseSimRegistryAddress("http://localhost:5000"), {
    origin: "http://localhost:5000",
    host: "localhost:5000",
    prefix: "",
  });
  assert.throws(() => parseSimRegistryAddress("registry.example.com/cocoon"), /not loopback/);
  assert.throws(() => parseSimRegistryAddress("10.0.0.1:5000/x"), /not loopback/);
  assert.throws(() => parseSimRegistryAddress("https://127.0.0.1:5000"), /plain http/);
});

Deno.test("registry: push then pull by tag; distinct content, distinct digests", async () => {
  const stub = startOciStub();
  try {
    const reg = new SimRegistry(`${stub.host}/cocoon`);
    assert.equal(await reg.hasManifest("vk-ns-a-0", "hibernate"), false);
    assert.equal(await reg.getManifest("vk-ns-a-0", "hibernate"), undefined);
    const d1 = await reg.push("vk-ns-a-0", "hibernate", '{"n":1}');
    const d2 = await reg.push("vk-ns-a-0", "latest", '{"n":2}');
    assert.notEqual(d1, d2);
    assert.equal(stub.digestOf("cocoon/vk-ns-a-0", "hibernate"), d1);
    assert.equal(stub.contentOf("cocoon/vk-ns-a-0", "latest"), '{"n":2}');
    assert.deepEqual(stub.tagsOf("cocoon/vk-ns-a-0"), ["hibernate", "latest"]);
    assert.equal(await reg.hasManifest("vk-ns-a-0", "hibernate"), true);
    const pulled = await reg.getManifest("vk-ns-a-0", "latest");
    assert.equal(pulled?.manifest.schemaVersion, 2);
    assert.equal(pulled?.digest, d2, "the pull names the manifest by the digest of its push");
  } finally {
    await stub.close();
  }
});

Deno.test("registry: a refused manifest PUT is an error naming the reference", async () => {
  const stub = startOciStub();
  try {
    stub.failPushes = true;
    const reg = new SimRegistry(stub.host);
    const err = await reg.push("vk-ns-b-0", "hibernate", "{}").catch((e) => e);
    assert.ok(err instanceof RegistryHttpError);
    assert.equal(err.status, 500);
    assert.match(err.message, /vk-ns-b-0:hibernate/);
    assert.deepEqual(stub.tagsOf("vk-ns-b-0"), []);
  } finally {
    await stub.close();
  }
});
