import assert from "node:assert/strict";
import { compareMinor, formatMinor, parseServerVersion } from "./server_version.ts";

Deno.test("server version: upstream, managed (minor with +, vendor tail) and empty fields", () => {
  assert.deepEqual(
    parseServerVersion({ major: "1", minor: "35", gitVersion: "v1.35.4", platform: "linux/amd64" }),
    { gitVersion: "v1.35.4", major: 1, minor: 35 },
  );
  assert.deepEqual(
    parseServerVersion({ major: "1", minor: "28+", gitVersion: "v1.28.3-eks-4f4795d" }),
    { gitVersion: "v1.28.3-eks-4f4795d", major: 1, minor: 28 },
  );
  assert.deepEqual(
    parseServerVersion({ major: "", minor: "", gitVersion: "v1.37.2" }),
    { gitVersion: "v1.37.2", major: 1, minor: 37 },
  );
  assert.deepEqual(parseServerVersion({ major: "1", minor: "33" }), {
    gitVersion: "v1.33",
    major: 1,
    minor: 33,
  });
  for (const body of [undefined, null, "v1.35.4", {}, { gitVersion: "master" }, { major: 1 }]) {
    assert.equal(parseServerVersion(body), undefined, JSON.stringify(body));
  }
});

Deno.test("server version: minor releases order by major, then minor", () => {
  assert.ok(compareMinor({ major: 1, minor: 9 }, { major: 1, minor: 33 }) < 0);
  assert.ok(compareMinor({ major: 2, minor: 0 }, { major: 1, minor: 37 }) > 0);
  assert.equal(compareMinor({ major: 1, minor: 33 }, { major: 1, minor: 33 }), 0);
  assert.equal(formatMinor({ major: 1, minor: 37 }), "1.37");
});
