/**
 * The registry proxy's tag deletes (a registry that deletes by tag, played in front of
 * docker-registry, which deletes only by digest) and the registry's catalog, on a real registry.
 */
import assert from "node:assert/strict";
import { registryAvailable, startRegistry } from "./registry.ts";
import { startRegistryProxy } from "./registry_proxy.ts";

Deno.test({
  name: "registry proxy: DELETE by tag only with tagDeletes, never taking a sibling tag",
  ignore: !registryAvailable(),
  async fn() {
    const reg = await startRegistry({ auth: "none" });
    const proxy = startRegistryProxy(reg.url);
    const del = async (repo: string, tag: string) => {
      const res = await fetch(`http://${proxy.host}/v2/${repo}/manifests/${tag}`, {
        method: "DELETE",
      });
      await res.body?.cancel();
      return res.status;
    };
    try {
      await reg.pushManifest("p/vk-a", "hibernate", '{"n":1}');
      await reg.pushManifest("p/vk-a", "latest", '{"n":2}');
      // The registry itself refuses a tag delete.
      assert.equal(await del("p/vk-a", "hibernate"), 400);
      assert.deepEqual(await reg.tagsOf("p/vk-a"), ["hibernate", "latest"]);

      proxy.tagDeletes = true;
      assert.equal(await del("p/vk-a", "hibernate"), 202);
      assert.deepEqual(await reg.tagsOf("p/vk-a"), ["latest"]);
      assert.equal(await del("p/vk-a", "hibernate"), 404);

      // Two tags on one digest: deleting the digest would take both, so the proxy refuses.
      await reg.pushManifest("p/vk-b", "hibernate", '{"same":1}');
      await reg.pushManifest("p/vk-b", "latest", '{"same":1}');
      assert.equal(await del("p/vk-b", "hibernate"), 400);
      assert.deepEqual(await reg.tagsOf("p/vk-b"), ["hibernate", "latest"]);

      // A digest delete passes through unchanged.
      const digest = await reg.digestOf("p/vk-b", "latest");
      assert.equal(await del("p/vk-b", digest!), 202);
      assert.deepEqual(await reg.tagsOf("p/vk-b"), []);

      assert.deepEqual(await reg.repositories(), ["p/vk-a", "p/vk-b"]);
      assert.deepEqual(
        proxy.requestsFor("p/vk-a", "DELETE").map((r) => r.status),
        [400, 202, 404],
      );
    } finally {
      await proxy.close();
      await reg.stop();
    }
  },
});
