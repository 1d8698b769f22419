import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import { ANNOTATION_IP, ANNOTATION_VMID, ANNOTATION_VNC_PORT } from "./keys.ts";
import { applyVMRuntime, parseVMRuntime } from "./vmruntime.ts";

Deno.test("applyVMRuntime then parseVMRuntime round-trips", () => {
  const pod: Pod = { metadata: {} };
  const r = { vmID: "qemu-1234", ip: "10.88.100.7", vncPort: 5901 };
  applyVMRuntime(r, pod);
  assert.deepEqual(pod.metadata.annotations, {
    [ANNOTATION_VMID]: "qemu-1234",
    [ANNOTATION_IP]: "10.88.100.7",
    [ANNOTATION_VNC_PORT]: "5901",
  });
  assert.deepEqual(parseVMRuntime(pod), r);
});

Deno.test("applyVMRuntime does not emit a zero VNC port", () => {
  const pod: Pod = { metadata: {} };
  applyVMRuntime({ vmID: "id", ip: "1.2.3.4", vncPort: 0 }, pod);
  assert.equal(pod.metadata.annotations?.[ANNOTATION_VNC_PORT], undefined);
});

Deno.test("parseVMRuntime reads a malformed or out-of-range VNC port as 0", () => {
  for (const v of ["not-a-number", "59.01", "2147483648", " 5901"]) {
    const pod: Pod = { metadata: { annotations: { [ANNOTATION_VNC_PORT]: v } } };
    assert.equal(parseVMRuntime(pod).vncPort, 0, v);
  }
});
