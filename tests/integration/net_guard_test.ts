/**
 * The operator's own allow-list (kube/net_guard.ts) in front of a real registry in token mode:
 * the registry's Bearer realm names a host the list does not hold, so the token request is
 * refused before it is sent: the token server never sees the credentials.
 */

import assert from "node:assert/strict";
import { installNetGuard, NetAllowList, removeNetGuard } from "../../kube/net_guard.ts";
import { newOciRegistry } from "../../snapshot/oci.ts";
import { registryAvailable, startRegistry } from "../harness/registry.ts";

const PREFIX = "cocoon/snapshots";

Deno.test({
  name: "real registry: a Bearer realm outside the allow-list is refused, no credentials sent",
  ignore: !registryAvailable(),
  async fn() {
    const reg = await startRegistry({ auth: "token" });
    const dir = await Deno.makeTempDir({ prefix: "cocoon-docker-config-" });
    try {
      const ts = reg.tokenServer!;
      const realm = new URL(ts.realm);
      const auth = btoa(`${reg.username}:${reg.password}`);
      await Deno.writeTextFile(
        `${dir}/config.json`,
        JSON.stringify({ auths: { [reg.host]: { auth } } }),
      );
      await reg.pushManifest(`${PREFIX}/vk-ns-a-0`, "hibernate", '{"vm":"a"}');
      const client = () =>
        newOciRegistry(`${reg.host}/${PREFIX}`, {
          env: { DOCKER_CONFIG: dir, HOME: dir },
          timeoutMs: 10_000,
        });
      ts.requests.length = 0;
      // Built before the guard, as main.ts builds its registry before connecting: it must not
      // keep the unguarded fetch.
      const early = client();

      // Only the registry itself: the realm's host (localhost:<port>) is not on the list.
      installNetGuard(new NetAllowList([reg.host]));
      try {
        const err = await early.hasManifest("vk-ns-a-0", "hibernate").catch((e: unknown) => e);
        assert.ok(err instanceof Error, `want an error, got ${err}`);
        assert.match(err.message, new RegExp(`refusing to connect to localhost:${realm.port}`));
        assert.match(err.message, /no rule names it/);
        assert.match(err.message, /cocoon\/snapshots\/vk-ns-a-0:hibernate/);
      } finally {
        removeNetGuard();
      }
      assert.deepEqual(ts.requests, [], "the token server saw a request");

      // The realm's host allowed on purpose (OPERATOR_ALLOW_NET): the same call succeeds.
      installNetGuard(new NetAllowList([reg.host, `localhost:${realm.port}`]));
      try {
        assert.equal(await client().hasManifest("vk-ns-a-0", "hibernate"), true);
      } finally {
        removeNetGuard();
      }
      assert.equal(ts.requests.length, 1);
    } finally {
      await reg.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
