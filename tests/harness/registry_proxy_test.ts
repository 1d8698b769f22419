import assert from "node:assert/strict";
import { registryAvailable, startRegistry } from "./registry.ts";
import { startRegistryProxy, tagDeleteOf } from "./registry_proxy.ts";

Deno.test("registry proxy: a DELETE by tag is told from one by digest and from other requests", () => {
  assert.deepEqual(tagDeleteOf("DELETE", "/v2/cocoon/vk-a-0/manifests/hibernate"), {
    repo: "cocoon/vk-a-0",
    tag: "hibernate",
  });
  assert.equal(tagDeleteOf("DELETE", "/v2/cocoon/vk-a-0/manifests/sha256:abc"), undefined);
  assert.equal(tagDeleteOf("HEAD", "/v2/cocoon/vk-a-0/manifests/hibernate"), undefined);
  assert.equal(tagDeleteOf("DELETE", "/v2/cocoon/vk-a-0/blobs/sha256:abc"), undefined);
});

Deno.test({
  name:
    "registry proxy: with tagDeletes a DELETE by tag removes the tag; without, distribution refuses it",
  ignore: !registryAvailable(),
  async fn() {
    const registry = await startRegistry({ auth: "none" });
    const plain = startRegistryProxy(registry.url);
    const accepting = startRegistryProxy(registry.url, { tagDeletes: true });
    try {
      const repo = "cocoon/vk-ns-set-0";
      await registry.pushManifest(repo, "hibernate", "state-1");
      await registry.pushManifest(repo, "latest", "state-2");
      const del = async (host: string, ref: string) => {
        const res = await fetch(`http://${host}/v2/${repo}/manifests/${ref}`, { method: "DELETE" });
        await res.body?.cancel();
        return res.status;
      };
      assert.equal(
        await del(plain.host, "hibernate"),
        400,
        "distribution 2.8 deletes by digest only",
      );
      assert.deepEqual(await registry.tagsOf(repo), ["hibernate", "latest"]);

      assert.equal(await del(accepting.host, "hibernate"), 202);
      assert.deepEqual(await registry.tagsOf(repo), ["latest"], "only the tag asked for");
      assert.equal(await del(accepting.host, "hibernate"), 404, "a missing tag is 404");
      assert.deepEqual(
        accepting.requests.map((r) => `${r.method} ${r.status}`),
        ["DELETE 202", "DELETE 404"],
        "each recorded once, as the client sent it",
      );
    } finally {
      await plain.close();
      await accepting.close();
      await registry.stop();
    }
  },
});
