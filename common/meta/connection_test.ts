import assert from "node:assert/strict";
import { connectionType } from "./connection.ts";

Deno.test("connectionType", async (t) => {
  const cases: [string, string, boolean, string, string][] = [
    ["vnc wins", "windows", true, "", "vnc"],
    ["windows", "windows", false, "", "rdp"],
    ["android", "android", false, "", "adb"],
    ["default", "linux", false, "", "ssh"],
    ["empty os", "", false, "", "ssh"],
    ["override beats os", "linux", false, "rdp", "rdp"],
    ["override beats vnc port", "linux", true, "rdp", "rdp"],
  ];
  for (const [name, os, vnc, override, want] of cases) {
    await t.step(name, () => assert.equal(connectionType(os, vnc, override), want));
  }
});
