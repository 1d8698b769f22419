/** VMRuntime: what vk-cocoon writes back on the pod once the VM exists (id, address, VNC port). */
import type { Pod } from "../../kube/core.ts";
import {
  annotation,
  ensureAnnotations,
  formatPort,
  parseGoInt,
  setIfNotEmpty,
} from "./annotations.ts";
import { ANNOTATION_IP, ANNOTATION_VMID, ANNOTATION_VNC_PORT } from "./keys.ts";

/** Runtime facts of a VM; "" / 0 when unknown. */
export interface VMRuntime {
  vmID: string;
  ip: string;
  vncPort: number;
}

/** Writes the runtime facts; empty values (and a zero port) are not written. */
export function applyVMRuntime(r: VMRuntime, pod: Pod): void {
  const a = ensureAnnotations(pod);
  setIfNotEmpty(a, ANNOTATION_VMID, r.vmID);
  setIfNotEmpty(a, ANNOTATION_IP, r.ip);
  setIfNotEmpty(a, ANNOTATION_VNC_PORT, formatPort(r.vncPort));
}

/** Reads the runtime facts; a VNC port that is not a 32-bit integer reads as 0. */
export function parseVMRuntime(pod: Pod): VMRuntime {
  const port = annotation(pod, ANNOTATION_VNC_PORT);
  return {
    vmID: annotation(pod, ANNOTATION_VMID),
    ip: annotation(pod, ANNOTATION_IP),
    vncPort: port === "" ? 0 : parseGoInt(port, 32) ?? 0,
  };
}
