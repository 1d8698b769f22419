import assert from "node:assert/strict";

/** Runs a script of this folder with args; returns its exit code and stderr. */
async function runScript(file: string, args: string[]): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(file, import.meta.url).pathname, ...args],
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

for (const [file, program] of [["./crds.ts", "crds"], ["./compile.ts", "compile"]]) {
  Deno.test(`${program}: a refused command line is one line and the usage, exit 2`, async () => {
    for (const args of [["--bogus"], ["stray"]]) {
      const { code, stderr } = await runScript(file, args);
      assert.equal(code, 2, stderr);
      const lines = stderr.trim().split("\n");
      assert.match(lines[0], new RegExp(`^${program}: `));
      assert.match(lines[1], new RegExp(`^usage: deno task ${program}`));
      assert.doesNotMatch(stderr, /\bat \w+ \(/, "no stack trace");
    }
  });
}
