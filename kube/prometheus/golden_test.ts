/**
 * kube/prometheus against prom-client 15.1.3's recorded output for the same registry
 * (testdata/scenario.ts builds it; testdata/exposition.txt and testdata/metrics.json are what
 * prom-client printed and returned): the exposition text byte for byte, getMetricsAsJSON() and
 * getSingleMetricAsString() equal, and the text accepted by `promtool check metrics`.
 *
 * One deliberate difference: prom-client puts `exemplar: null` on every histogram bucket value
 * (exemplars off); this registry has no exemplars and leaves the key out.
 */
import assert from "node:assert/strict";
import { Counter, Gauge, Histogram, Registry } from "./mod.ts";
import { buildScenario, type ScenarioLibrary, toGoldenJson } from "./testdata/scenario.ts";

const testdata = new URL("./testdata/", import.meta.url);
const lib = { Registry, Counter, Gauge, Histogram } as unknown as ScenarioLibrary<Registry>;

interface Golden {
  contentType: string;
  json: { values: Record<string, unknown>[] }[];
  single: string;
}

async function golden(): Promise<{ exposition: string; recorded: Golden }> {
  const exposition = await Deno.readTextFile(new URL("exposition.txt", testdata));
  const recorded = JSON.parse(await Deno.readTextFile(new URL("metrics.json", testdata)));
  return { exposition, recorded };
}

/** The recorded JSON without prom-client's exemplar keys (see the module doc). */
function withoutExemplars(g: Golden): Golden {
  const json = g.json.map((family) => ({
    ...family,
    values: family.values.map(({ exemplar: _exemplar, ...rest }) => rest),
  }));
  return { ...g, json };
}

Deno.test("prometheus golden: the exposition text is byte-identical to prom-client 15.1.3's", async () => {
  const { exposition } = await golden();
  const reg = buildScenario(lib);
  assert.equal(await reg.metrics(), exposition);
});

Deno.test("prometheus golden: getMetricsAsJSON, getSingleMetricAsString and contentType equal prom-client's", async () => {
  const { recorded } = await golden();
  const reg = buildScenario(lib);
  await reg.metrics(); // the recording scraped once first: collect callbacks count scrapes
  const json = await reg.getMetricsAsJSON();
  const single = await reg.getSingleMetricAsString("phase_seconds");
  const mine = JSON.parse(toGoldenJson({ contentType: reg.contentType, json, single }));
  assert.deepEqual(mine, withoutExemplars(recorded));
  // The exemplar keys are the only thing the comparison leaves out.
  const dropped = recorded.json.flatMap((f) => f.values).filter((v) => "exemplar" in v);
  assert.ok(dropped.every((v) => v.exemplar === null && v.metricName !== undefined));
});

Deno.test("prometheus golden: promtool check metrics accepts the exposition and rejects a broken one", async (t) => {
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
  const text = await buildScenario(lib).metrics();
  await t.step("the scenario's exposition", async () => {
    const res = await check(text);
    assert.equal(res.code, 0, res.output);
  });
  await t.step("a label value with a raw newline fails (the check can fail)", async () => {
    const res = await check('bad_total{x="a\nb"} 1\n');
    assert.notEqual(res.code, 0);
  });
});
