import assert from "node:assert/strict";
import { sampleSum } from "./prom_text.ts";

const TEXT = `# HELP cocoon_operator_subagent_rebuild_total x
# TYPE cocoon_operator_subagent_rebuild_total counter
cocoon_operator_subagent_rebuild_total{namespace="a",cocoonset="demo"} 3
cocoon_operator_subagent_rebuild_total{namespace="b",cocoonset="demo"} 2
leader_election_master_status{name="cocoon-operator.cocoonset.cocoonstack.io"} 1
odd{msg="say \\"hi\\", ok"} 7
wake_seconds_count{result="ok"} 1
wake_seconds_bucket{result="ok",le="10"} 1
`;

Deno.test("prom text: sums the samples whose labels include the given ones; absent is 0", () => {
  assert.equal(sampleSum(TEXT, "cocoon_operator_subagent_rebuild_total"), 5);
  assert.equal(sampleSum(TEXT, "cocoon_operator_subagent_rebuild_total", { namespace: "a" }), 3);
  assert.equal(
    sampleSum(TEXT, "cocoon_operator_subagent_rebuild_total", { namespace: "c" }),
    0,
    "a series never incremented reads as 0",
  );
  assert.equal(sampleSum(TEXT, "leader_election_master_status"), 1);
  assert.equal(sampleSum(TEXT, "odd", { msg: 'say "hi", ok' }), 7);
  assert.equal(sampleSum(TEXT, "wake_seconds_count", { result: "ok" }), 1);
  assert.equal(sampleSum(TEXT, "wake_seconds"), 0, "a family name is not a sample name");
});
