/** VMRuntime: what vk-cocoon writes back on the pod once the VM exists (id, address, VNC port). */
import type { Pod } from "../../kube/core.ts";
import {
  annotation,
  ensureAnnotations,
  formatPort,
  parseGoInt,
  setIfNotEmpty,
} from "./annotations.ts";
import { AnnotationIP, AnnotationVMID, AnnotationVNCPort } from "./keys.ts";

/** Runtime facts of a VM; "" / 0 when unknown. */
export interface VMRuntime {
  vmID: string;
  ip: string;
  vncPort: number;
}

/** Writes the runtime facts; empty values (and a zero port) are not written. */
export function applyVMRuntime(r: VMRuntime, pod: Pod): void {
  const a = ensureAnnotations(pod);
  setIfNotEmpty(a, AnnotationVMID, r.vmID);
  setIfNotEmpty(a, AnnotationIP, r.ip);
  setIfNotEmpty(a, AnnotationVNCPort, formatPort(r.vncPort));
}

/** Reads the runtime facts; a VNC port that is not a 32-bit integer reads as 0. */
export function parseVMRuntime(pod: Pod): VMRuntime {
  const port = annotation(pod, AnnotationVNCPort);
  return {
    vmID: annotation(pod, AnnotationVMID),
    ip: annotation(pod, AnnotationIP),
    vncPort: port === "" ? 0 : parseGoInt(port, 32) ?? 0,
  };
}
