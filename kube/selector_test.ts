import assert from "node:assert/strict";
import { labelSelectorString, matchesLabels, parseLabelSelector } from "./selector.ts";

/** Which of the label sets a selector picks, by index. */
function picks(selector: string, sets: (Record<string, string> | undefined)[]): number[] {
  const parsed = parseLabelSelector(selector);
  return sets.flatMap((labels, i) => matchesLabels(parsed, labels) ? [i] : []);
}

const OWNER = "cocoonset.cocoonstack.io/name";

Deno.test("selector: a bare key selects objects carrying the label, whatever its value", () => {
  const parsed = parseLabelSelector(OWNER);
  assert.deepEqual(parsed.requirements, [{ key: OWNER, op: "exists", values: [] }]);
  assert.equal(parsed.text, OWNER);
  assert.deepEqual(
    picks(OWNER, [{ [OWNER]: "demo" }, { [OWNER]: "" }, { other: "demo" }, {}, undefined]),
    [0, 1],
  );
});

Deno.test("selector: != and notin also select objects without the label; in and = do not", () => {
  const sets: Record<string, string>[] = [{ tier: "x" }, { tier: "y" }, { tier: "z" }, {}];
  assert.deepEqual(picks("tier!=x", sets), [1, 2, 3]);
  assert.deepEqual(picks("tier notin (x, y)", sets), [2, 3]);
  assert.deepEqual(picks("tier in (y,x)", sets), [0, 1]);
  assert.deepEqual(picks("tier=x", sets), [0]);
  assert.deepEqual(picks("tier==x", sets), [0]);
  assert.deepEqual(picks("!tier", sets), [3]);
});

Deno.test("selector: requirements combine with AND; the query form is canonical", () => {
  const sets: Record<string, string>[] = [
    { [OWNER]: "a", tier: "x" },
    { [OWNER]: "a", tier: "y" },
    { tier: "y" },
  ];
  assert.deepEqual(picks(`tier in (y), ${OWNER}`, sets), [1]);
  assert.equal(
    labelSelectorString(`tier in ( y , x ),${OWNER},role != sub-agent`),
    `${OWNER},role!=sub-agent,tier in (x,y)`,
  );
  assert.equal(labelSelectorString({ app: "a", [OWNER]: "demo" }), `app=a,${OWNER}=demo`);
  assert.equal(labelSelectorString(undefined), "");
});

Deno.test("selector: malformed selectors are refused with the selector named", () => {
  for (
    const bad of [
      "tier in ()",
      "tier notin ( )",
      "bad key",
      "a=b=c",
      "/name",
      "Upper.Case/name",
      "a..b/name",
      "a.-b/name",
      "a-.b/name",
      `${"p".repeat(254)}/name`,
      `${"n".repeat(64)}`,
      `tier=${"v".repeat(64)}`,
    ]
  ) {
    assert.throws(() => parseLabelSelector(bad), /invalid label selector/, bad);
  }
  assert.doesNotThrow(() => parseLabelSelector(`${"p".repeat(253)}/${"n".repeat(63)}`));
  assert.doesNotThrow(() => parseLabelSelector("a-b.c-d.io/x,1.2/y"));
});
