import { deepStrictEqual, strictEqual } from "node:assert/strict";
import { beyondTolerance, compareDigests, formatFinding, variation } from "./compare.ts";
import { type Digest, emptyDigest } from "./digest.ts";
import { main } from "./behaviour_digest.ts";

function digest(parts: Partial<Omit<Digest, "inputs">>): Digest {
  return { ...emptyDigest(), ...parts };
}

Deno.test("compare: a key on one side only is a difference whatever its count", () => {
  const before = digest({ events: { "InvalidSpec Warning CocoonSet by op": 3 } });
  const after = digest({
    events: { "InvalidSpec Warning CocoonSet by op": 3, "New Normal Pod by op": 1 },
  });
  const findings = compareDigests(before, after);
  deepStrictEqual(findings.map(formatFinding), [
    "events: only after: New Normal Pod by op (1)",
  ]);
  deepStrictEqual(compareDigests(after, before).map((f) => f.kind), ["only-before"]);
});

Deno.test("compare: counts differ only beyond both the absolute and the relative tolerance", () => {
  const tol = { absolute: 3, relative: 0.5 };
  strictEqual(beyondTolerance(1, 4, tol), false); // 3 is not more than 3
  strictEqual(beyondTolerance(1, 5, tol), true); // 4 > 3 and 4 > 2.5
  strictEqual(beyondTolerance(100, 140, tol), false); // 40 <= 70
  strictEqual(beyondTolerance(100, 210, tol), true); // 110 > 105
  const findings = compareDigests(
    digest({ requests: { "get core/pods namespaced": 100, "list core/pods cluster": 2 } }),
    digest({ requests: { "get core/pods namespaced": 210, "list core/pods cluster": 4 } }),
    tol,
  );
  deepStrictEqual(findings.map(formatFinding), [
    "requests: count 100 -> 210: get core/pods namespaced",
  ]);
});

Deno.test("compare: metrics by key only; responses and event repeats are advisory", () => {
  const findings = compareDigests(
    digest({
      metrics: { "up gauge {}": 1 },
      responses: { "create core/pods 409": 2 },
      eventRepeats: { "R Normal Pod by op": 1 },
    }),
    digest({ metrics: { "up gauge {}": 9 }, eventRepeats: { "R Normal Pod by op": 40 } }),
  );
  deepStrictEqual(findings.map(formatFinding), [
    "responses (advisory): only before: create core/pods 409 (2)",
    "eventRepeats (advisory): count 1 -> 40: R Normal Pod by op",
  ]);
});

Deno.test("compare: variation reports the largest spread per section", () => {
  const v = variation(
    digest({ requests: { a: 10, b: 4, c: 1 } }),
    digest({ requests: { a: 12, b: 2 } }),
  );
  deepStrictEqual(v.requests, { keys: 3, oneSided: 1, maxAbsolute: 2, maxRelative: 0.5 });
  deepStrictEqual(v.events, { keys: 0, oneSided: 0, maxAbsolute: 0, maxRelative: 0 });
});

Deno.test("compare: the command exits 1 on a behaviour difference, 0 on advisory ones only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const write = (name: string, d: Digest) =>
      Deno.writeTextFile(`${dir}/${name}`, JSON.stringify(d));
    await write("a.json", digest({ statusWrites: { "x phase=Running conditions=[-]": 1 } }));
    await write("b.json", digest({ statusWrites: {} }));
    await write(
      "c.json",
      digest({
        statusWrites: { "x phase=Running conditions=[-]": 1 },
        responses: { "get core/pods 404": 1 },
      }),
    );
    const log = console.log;
    console.log = () => {};
    try {
      strictEqual(await main(["--compare", `${dir}/a.json`, `${dir}/b.json`]), 1);
      strictEqual(await main(["--compare", `${dir}/a.json`, `${dir}/c.json`]), 0);
      strictEqual(await main(["--compare", `${dir}/a.json`, `${dir}/a.json`]), 0);
    } finally {
      console.log = log;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("compare: the default tolerance passes the measured spread and reports a doubling", () => {
  // The largest moves between two baseline runs of the same code (docs/development.md).
  const before = digest({
    requests: { "get cocoonsets": 61, "patch status": 325, "update leases": 8, "get pods": 20 },
  });
  const after = digest({
    requests: { "get cocoonsets": 56, "patch status": 312, "update leases": 6, "get pods": 40 },
  });
  deepStrictEqual(compareDigests(before, after).map(formatFinding), [
    "requests: count 20 -> 40: get pods",
  ]);
});
