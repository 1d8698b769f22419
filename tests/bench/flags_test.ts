import assert from "node:assert/strict";
import { BENCH_USAGE, BenchFlagsError, FLOW_NAMES, parseBenchFlags } from "./flags.ts";
import { DEFAULT_OPERATOR_CMD } from "./operator_under_test.ts";
import { parseReplicas } from "./delete_at_scale.ts";

Deno.test("bench flags: defaults, --quick, --operator-cmd and --help", () => {
  assert.deepEqual(parseBenchFlags([]), { quick: false, operatorCmd: DEFAULT_OPERATOR_CMD });
  assert.deepEqual(parseBenchFlags(["--quick", "--operator-cmd", "./op --x"]), {
    quick: true,
    operatorCmd: "./op --x",
  });
  assert.equal(parseBenchFlags(["--help"]), "help");
  assert.equal(parseBenchFlags(["-h"]), "help");
});

Deno.test("bench flags: set counts, fleet sizes and a choice of flows", () => {
  assert.deepEqual(
    parseBenchFlags(["--sets", "10, 20", "--fleet-sets", "1000,5000", "--flows", "releaseWake"]),
    {
      quick: false,
      operatorCmd: DEFAULT_OPERATOR_CMD,
      sets: [10, 20],
      fleetSets: [1000, 5000],
      flows: ["releaseWake"],
    },
  );
  assert.deepEqual(
    (parseBenchFlags(["--flows", FLOW_NAMES.join(",")]) as { flows: string[] }).flows,
    ["hibernateWake", "suspendResume", "releaseWake"],
  );
});

Deno.test("bench flags: a typo or a stray argument is refused, not run with the defaults", () => {
  for (
    const args of [
      ["--quik"],
      ["convergence"],
      ["--operator-cmd"],
      ["--fleet-sets", "0"],
      ["--fleet-sets", "1k"],
      ["--flows", "hibernate"],
      ["--flows", ""],
    ]
  ) {
    assert.throws(() => parseBenchFlags(args), BenchFlagsError, args.join(" "));
  }
});

Deno.test("bench from the command line: a refused flag is one line and the usage, exit 2; --help exits 0", async () => {
  const script = new URL("./convergence.ts", import.meta.url).pathname;
  const run = (arg: string) =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script, arg],
      stdout: "piped",
      stderr: "piped",
    }).output();
  const bad = await run("--bogus");
  const err = new TextDecoder().decode(bad.stderr);
  assert.equal(bad.code, 2, err);
  assert.match(err, /^bench: .*bogus.*\n/);
  assert.ok(err.includes(BENCH_USAGE), err);
  assert.doesNotMatch(err, /\bat \w+ \(/, "no stack trace");

  const help = await run("--help");
  assert.equal(help.code, 0);
  assert.equal(new TextDecoder().decode(help.stdout).trim(), BENCH_USAGE);
});

Deno.test("delete_at_scale --replicas: a whole number of at least 1", () => {
  assert.equal(parseReplicas([]), 1000);
  assert.equal(parseReplicas(["--replicas", "25"]), 25);
  for (const bad of [["--replicas", "0"], ["--replicas", "1.5"], ["--replicas", "many"], ["--x"]]) {
    assert.equal(parseReplicas(bad), undefined, bad.join(" "));
  }
});
