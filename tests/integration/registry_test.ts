/**
 * The OCI client against a real registry (distribution 2.8, /usr/bin/docker-registry) in each
 * auth mode the harness offers: anonymous, htpasswd Basic and token auth. Credentials reach the
 * client the way they do in production: through a Docker config file found via DOCKER_CONFIG.
 */

import assert from "node:assert/strict";
import { RegistryError } from "../../snapshot/errors.ts";
import { newOciRegistry, type OciRegistry } from "../../snapshot/oci.ts";
import { hasHibernateSnapshot } from "../../snapshot/registry.ts";
import {
  type RegistryAuthMode,
  registryAvailable,
  startRegistry,
  type TestRegistry,
} from "../harness/registry.ts";

const PREFIX = "cocoon/snapshots";

/** A client whose only credential source is a Docker config written for this test. */
async function clientFor(
  reg: TestRegistry,
  auth: Record<string, string> | undefined,
  dir: string,
): Promise<OciRegistry> {
  const auths = auth ? { [reg.host]: auth } : {};
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify({ auths }));
  return newOciRegistry(`${reg.host}/${PREFIX}`, {
    env: { DOCKER_CONFIG: dir, HOME: dir },
    timeoutMs: 10_000,
  });
}

function credentials(
  reg: TestRegistry,
  password = reg.password,
): Record<string, string> | undefined {
  return reg.auth === "none" ? undefined : { auth: btoa(`${reg.username}:${password}`) };
}

for (const mode of ["none", "basic", "token"] as RegistryAuthMode[]) {
  Deno.test({
    name: `real registry (${mode} auth): probe, delete, shared digest, bad credentials, outage`,
    ignore: !registryAvailable(),
    async fn(t) {
      const started = performance.now();
      const reg = await startRegistry({ auth: mode });
      const dir = await Deno.makeTempDir({ prefix: "cocoon-docker-config-" });
      try {
        const client = await clientFor(reg, credentials(reg), dir);

        await t.step(
          "hasManifest: true for a pushed tag, false for absent tags and repos",
          async () => {
            await reg.pushManifest(`${PREFIX}/vk-ns-a-0`, "hibernate", '{"vm":"a"}');
            assert.equal(await client.hasManifest("vk-ns-a-0", "hibernate"), true);
            assert.equal(await hasHibernateSnapshot(client, "vk-ns-a-0"), true);
            assert.equal(await client.hasManifest("vk-ns-a-0", "latest"), false);
            assert.equal(await client.hasManifest("vk-ns-never-0", "hibernate"), false);
          },
        );

        await t.step(
          "deleteManifest removes the tag and keeps a latest with other content",
          async () => {
            await reg.pushManifest(`${PREFIX}/vk-ns-b-0`, "latest", '{"vm":"b","gen":1}');
            await reg.pushManifest(`${PREFIX}/vk-ns-b-0`, "hibernate", '{"vm":"b","gen":2}');
            await client.deleteManifest("vk-ns-b-0", "hibernate");
            assert.equal(await client.hasManifest("vk-ns-b-0", "hibernate"), false);
            assert.deepEqual(await reg.tagsOf(`${PREFIX}/vk-ns-b-0`), ["latest"]);
          },
        );

        await t.step("deleting an absent tag (or repository) succeeds", async () => {
          await client.deleteManifest("vk-ns-b-0", "hibernate");
          await client.deleteManifest("vk-ns-never-0", "hibernate");
        });

        await t.step(
          "hibernate sharing latest's digest is not deleted: latest survives",
          async () => {
            const d1 = await reg.pushManifest(`${PREFIX}/vk-ns-c-0`, "latest", '{"vm":"c"}');
            const d2 = await reg.pushManifest(`${PREFIX}/vk-ns-c-0`, "hibernate", '{"vm":"c"}');
            assert.equal(d1, d2);
            const outcome = await client.deleteManifestWithOutcome("vk-ns-c-0", "hibernate");
            assert.equal(outcome.deleted, false);
            assert.match(outcome.skippedReason ?? "", /share/);
            assert.deepEqual(await reg.tagsOf(`${PREFIX}/vk-ns-c-0`), ["hibernate", "latest"]);
            assert.equal(await client.hasManifest("vk-ns-c-0", "latest"), true);
          },
        );

        if (mode === "none") {
          await t.step(
            "distribution 2.8 refuses DELETE by tag (why the digest fallback exists)",
            async () => {
              await reg.pushManifest(`${PREFIX}/vk-ns-d-0`, "hibernate", '{"vm":"d"}');
              const res = await fetch(`${reg.url}/v2/${PREFIX}/vk-ns-d-0/manifests/hibernate`, {
                method: "DELETE",
              });
              const body = await res.json() as { errors: Array<{ code: string }> };
              assert.equal(res.status, 400);
              assert.equal(body.errors[0].code, "DIGEST_INVALID");
            },
          );
        } else {
          await t.step("wrong password: a clear auth error, never 'absent'", async () => {
            const badDir = await Deno.makeTempDir({ prefix: "cocoon-docker-config-" });
            try {
              const bad = await clientFor(reg, credentials(reg, "wrong-password"), badDir);
              const err = await bad.hasManifest("vk-ns-a-0", "hibernate").catch((e: unknown) => e);
              assert.ok(err instanceof RegistryError, `want RegistryError, got ${err}`);
              assert.equal(err.status, 401);
              assert.ok(err.isAuth);
              assert.match(err.message, /cocoon\/snapshots\/vk-ns-a-0:hibernate/);
              assert.match(err.message, /401 Unauthorized/);
              await assert.rejects(bad.deleteManifest("vk-ns-a-0", "hibernate"), RegistryError);
              // Nothing was deleted by the failed attempt.
              assert.deepEqual(await reg.tagsOf(`${PREFIX}/vk-ns-a-0`), ["hibernate"]);
            } finally {
              await Deno.remove(badDir, { recursive: true });
            }
          });
        }

        if (mode === "token") {
          await t.step(
            "token scopes: pull for HEAD, push,pull,delete for DELETE; tokens reused",
            async () => {
              const ts = reg.tokenServer!;
              const fresh = await clientFor(reg, credentials(reg), dir);
              ts.requests.length = 0;
              await reg.pushManifest(`${PREFIX}/vk-ns-e-0`, "hibernate", '{"vm":"e"}');
              for (let i = 0; i < 3; i++) {
                assert.equal(await fresh.hasManifest("vk-ns-e-0", "hibernate"), true);
              }
              await fresh.deleteManifest("vk-ns-e-0", "hibernate");
              assert.deepEqual(ts.requests.map((r) => [r.user, r.scopes]), [
                [reg.username, [`repository:${PREFIX}/vk-ns-e-0:pull`]],
                [reg.username, [`repository:${PREFIX}/vk-ns-e-0:push,pull,delete`]],
              ]);
              assert.ok(ts.requests.every((r) => r.service === ts.service));
            },
          );

          await t.step(
            "docker config identitytoken is exchanged with the refresh-token grant",
            async () => {
              const ts = reg.tokenServer!;
              const idDir = await Deno.makeTempDir({ prefix: "cocoon-docker-config-" });
              try {
                const viaRefresh = await clientFor(reg, { identitytoken: ts.refreshToken }, idDir);
                ts.requests.length = 0;
                assert.equal(await viaRefresh.hasManifest("vk-ns-a-0", "hibernate"), true);
                assert.deepEqual(ts.requests.map((r) => [r.method, r.grantType]), [[
                  "POST",
                  "refresh_token",
                ]]);
              } finally {
                await Deno.remove(idDir, { recursive: true });
              }
            },
          );
        }

        await t.step("registry down: every call fails, none reads as absent", async () => {
          await reg.stop();
          const err = await client.hasManifest("vk-ns-a-0", "hibernate").catch((e: unknown) => e);
          assert.ok(err instanceof Error, `want an error, got ${err}`);
          assert.match(err.message, /cocoon\/snapshots\/vk-ns-a-0:hibernate/);
          // A client that never reached the registry fails in its ping: still named by repo:tag.
          const late = await clientFor(reg, credentials(reg), dir);
          const lateErr = await late.hasManifest("vk-ns-a-0", "hibernate").catch((e: unknown) => e);
          assert.ok(lateErr instanceof Error, `want an error, got ${lateErr}`);
          assert.match(lateErr.message, /^HEAD manifest cocoon\/snapshots\/vk-ns-a-0:hibernate: /);
          await assert.rejects(
            hasHibernateSnapshot(client, "vk-ns-a-0"),
            /probe hibernate snapshot vk-ns-a-0/,
          );
          await assert.rejects(client.deleteManifest("vk-ns-a-0", "hibernate"));
        });
      } finally {
        await reg.stop();
        await Deno.remove(dir, { recursive: true });
        console.log(
          `registry (${mode}) scenario took ${Math.round(performance.now() - started)} ms`,
        );
      }
    },
  });
}
