/**
 * Every manifest in examples/ is valid against the project's CRDs on a real kube-apiserver
 * (server-side dry-run apply: schema, defaults and CEL rules), and the examples fit the local
 * stack of `deno task dev` they are written for: the pinned set names a simulator node, the
 * hibernation targets the basic set's main pod.
 */
import assert from "node:assert/strict";
import { type ControlPlane, startControlPlane } from "../harness/control_plane.ts";
import { SIM_NODES } from "../../scripts/dev.ts";

const EXAMPLES = new URL("../../examples/", import.meta.url).pathname;

type Obj = Record<string, unknown>;
type CocoonSetLike = {
  metadata: { name: string };
  spec: {
    agent: { replicas?: number };
    toolboxes?: unknown[];
    hibernatePolicy?: string;
    suspend?: boolean;
    nodeName?: string;
  };
};

/** Server-side dry-run apply of one file; the object as the server would store it. */
async function dryRun(cp: ControlPlane, path: string): Promise<Obj> {
  const res = await cp.kubectl([
    "apply",
    "--server-side",
    "--dry-run=server",
    "--field-manager=examples-test",
    "-f",
    path,
    "-o",
    "json",
  ]);
  assert.equal(res.code, 0, `${path} is not valid: ${res.stderr}`);
  return JSON.parse(res.stdout);
}

Deno.test("examples: each one passes a server-side dry-run apply against the CRDs", async (t) => {
  const files = [...Deno.readDirSync(EXAMPLES)].map((e) => e.name).filter((n) =>
    n.endsWith(".yaml")
  ).sort();
  assert.deepEqual(files, [
    "cocoonset-basic.yaml",
    "cocoonset-pinned.yaml",
    "cocoonset-release.yaml",
    "cocoonset-suspend-retain.yaml",
    "hibernation.yaml",
  ]);
  const cp = await startControlPlane();
  try {
    const stored: Record<string, Obj> = {};
    for (const file of files) {
      await t.step(file, async () => {
        stored[file] = await dryRun(cp, `${EXAMPLES}${file}`);
      });
    }

    await t.step(
      "the dry run really validates: a release set with sub-agents is refused",
      async () => {
        const dir = await Deno.makeTempDir();
        try {
          const text = (await Deno.readTextFile(`${EXAMPLES}cocoonset-release.yaml`))
            .replace("  agent:\n", "  agent:\n    replicas: 2\n");
          await Deno.writeTextFile(`${dir}/bad.yaml`, text);
          const res = await cp.kubectl([
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            `${dir}/bad.yaml`,
          ]);
          assert.notEqual(res.code, 0);
          assert.match(res.stderr, /hibernatePolicy=release requires agent.replicas=0/);
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      },
    );

    await t.step("the examples say what their names promise", () => {
      const basic = stored["cocoonset-basic.yaml"] as unknown as CocoonSetLike;
      assert.equal(basic.spec.agent.replicas, 2, "basic: two sub-agents");
      assert.equal(basic.spec.toolboxes?.length, 1, "basic: one toolbox");
      const retain = stored["cocoonset-suspend-retain.yaml"] as unknown as CocoonSetLike;
      assert.equal(retain.spec.hibernatePolicy, "retain");
      const release = stored["cocoonset-release.yaml"] as unknown as CocoonSetLike;
      assert.equal(release.spec.hibernatePolicy, "release");
      const pinned = stored["cocoonset-pinned.yaml"] as unknown as CocoonSetLike;
      const simNodes = Array.from({ length: SIM_NODES.count }, (_, i) => `${SIM_NODES.prefix}${i}`);
      assert.ok(simNodes.includes(pinned.spec.nodeName ?? ""), "pinned: a node of the dev stack");
      const hib = stored["hibernation.yaml"] as { spec?: { podRef?: { name?: string } } };
      assert.equal(hib.spec?.podRef?.name, `${basic.metadata.name}-0`, "the basic set's main");
    });
  } finally {
    await cp.stop();
  }
});
