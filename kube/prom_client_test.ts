/**
 * The text format of the pinned prom-client, against what 15.1.3 printed for the same registry
 * (testdata/prom_client_scenario.ts, testdata/prom_client_exposition.txt): escaping, number
 * formats, label order and empty families byte for byte, so a change of the library that would
 * change what Prometheus reads fails here; promtool, when installed, accepts the text and
 * rejects a broken one.
 */
import assert from "node:assert/strict";
import { buildScenario } from "./testdata/prom_client_scenario.ts";

const golden = new URL("./testdata/prom_client_exposition.txt", import.meta.url);

Deno.test("prom-client: the scenario's exposition is byte-identical to 15.1.3's recorded one", async () => {
  assert.equal(await buildScenario().metrics(), await Deno.readTextFile(golden));
});

Deno.test("prom-client: promtool check metrics accepts the exposition and rejects a broken one", async (t) => {
  const promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
  if (!promtool) {
    if (Deno.env.get("CI")) {
      throw new Error("promtool is not installed (apt-get install prometheus)");
    }
    return;
  }
  const check = async (text: string) => {
    const child = new Deno.Command(promtool, {
      args: ["check", "metrics"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(text));
    await writer.close();
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, output: dec.decode(out.stdout) + dec.decode(out.stderr) };
  };
  const text = await buildScenario().metrics();
  await t.step("the scenario's exposition", async () => {
    const res = await check(text);
    assert.equal(res.code, 0, res.output);
  });
  await t.step("a label value with a raw newline fails (the check can fail)", async () => {
    const res = await check('bad_total{x="a\nb"} 1\n');
    assert.notEqual(res.code, 0);
  });
});
