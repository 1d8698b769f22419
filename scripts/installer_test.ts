/**
 * dist/install.yaml and the chart's copy of the alert rules are what `deno task installer` makes
 * of config/ now: a change to config/ without running the task fails here. kustomize is the
 * control plane's kubectl, so without `deno task envtest`'s binaries these tests are skipped
 * (with CI set they fail instead).
 */
import assert from "node:assert/strict";
import { loadAll } from "js-yaml";
import { existingEnvtestBinDir } from "./envtest.ts";
import {
  CHART_RULES_PATH,
  defaultImage,
  generatedFiles,
  INSTALLER_PATH,
  kustomize,
  renderInstaller,
  staleFiles,
} from "./installer.ts";

const haveKubectl = Boolean(await existingEnvtestBinDir()) || Boolean(Deno.env.get("CI"));
const skip = haveKubectl ? "" : " (skipped: no kubectl; run `deno task envtest`)";
const root = new URL("../", import.meta.url);

type Obj = { kind: string; metadata: { name: string }; spec?: Record<string, unknown> };
const parse = (text: string) => (loadAll(text) as (Obj | null)[]).filter((o): o is Obj => !!o);

function image(objects: Obj[]): string | undefined {
  const deploy = objects.find((o) => o.kind === "Deployment");
  const pod = (deploy?.spec?.template as { spec: { containers: { image: string }[] } }).spec;
  return pod.containers[0].image;
}

Deno.test({
  name:
    `dist/install.yaml and the chart's alert rules are fresh (run \`deno task installer\`)${skip}`,
  ignore: !haveKubectl,
  async fn() {
    assert.deepEqual(await staleFiles(), []);
  },
});

Deno.test({
  name: `installer: a stale or missing copy is reported by path${skip}`,
  ignore: !haveKubectl,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const url = new URL(`file://${dir}/`);
      assert.deepEqual(await staleFiles(url), [INSTALLER_PATH, CHART_RULES_PATH]);
      for (const [path, text] of await generatedFiles()) {
        await Deno.mkdir(new URL("./", new URL(path, url)), { recursive: true });
        await Deno.writeTextFile(new URL(path, url), text);
      }
      assert.deepEqual(await staleFiles(url), []);
      const installer = new URL(INSTALLER_PATH, url);
      await Deno.writeTextFile(
        installer,
        (await Deno.readTextFile(installer)).replace("replicas: 1", "replicas: 2"),
      );
      assert.deepEqual(await staleFiles(url), [INSTALLER_PATH]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: `installer: config/default's objects, in one file; --image changes the image only${skip}`,
  ignore: !haveKubectl,
  async fn() {
    const built = parse(await kustomize(new URL("config/default", root).pathname));
    const committed = parse(await Deno.readTextFile(new URL(INSTALLER_PATH, root)));
    assert.deepEqual(committed, built);
    assert.equal(image(committed), await defaultImage());

    const ref = "registry.example.com/cocoon/cocoon-operator:v9.9.9";
    const text = await renderInstaller(ref);
    assert.match(text.split("\n")[0], /registry\.example\.com\/cocoon\/cocoon-operator:v9\.9\.9/);
    const other = parse(text);
    assert.equal(image(other), ref);
    const deploy = (objs: Obj[]) => objs.find((o) => o.kind === "Deployment");
    const withoutImage = (objs: Obj[]) =>
      JSON.stringify(objs).replaceAll(JSON.stringify(image(objs)), '"<image>"');
    assert.ok(deploy(other));
    assert.equal(withoutImage(other), withoutImage(built));
  },
});
