/**
 * Records prom-client 15.1.3's output for kube/prometheus/testdata/scenario.ts into the golden
 * files golden_test.ts compares kube/prometheus against. Run once, before prom-client left the
 * import map: `deno run -A tests/tools/record_prometheus_golden.ts`.
 *
 * @module
 */
import * as prom from "npm:prom-client@15.1.3";
import {
  buildScenario,
  type ScenarioLibrary,
  toGoldenJson,
} from "../../kube/prometheus/testdata/scenario.ts";

const dir = new URL("../../kube/prometheus/testdata/", import.meta.url);
const lib = prom as unknown as ScenarioLibrary<prom.Registry>;
const reg = buildScenario(lib);
const exposition = await reg.metrics();
const json = await reg.getMetricsAsJSON();
const single = await reg.getSingleMetricAsString("phase_seconds");
await Deno.writeTextFile(new URL("exposition.txt", dir), exposition);
await Deno.writeTextFile(
  new URL("metrics.json", dir),
  toGoldenJson({ contentType: reg.contentType, json, single }),
);
console.log(`recorded ${exposition.split("\n").length} lines`);
