/** Small pod-annotation helpers shared by the typed annotation contracts in this folder. */
import type { KubeObject } from "../../kube/object.ts";

/** The object's annotation map, created when missing so it can be written to. */
export function ensureAnnotations(obj: KubeObject): Record<string, string> {
  obj.metadata.annotations ??= {};
  return obj.metadata.annotations;
}

/** The annotation value, "" when absent (a Go map lookup). */
export function annotation(obj: KubeObject, key: string): string {
  return obj.metadata.annotations?.[key] ?? "";
}

/** Writes key=value unless value is empty; empty values never clear what is there. */
export function setIfNotEmpty(m: Record<string, string>, key: string, value: string): void {
  if (value !== "") m[key] = value;
}

/** A port as an annotation value: "" for zero or negative ports. */
export function formatPort(port: number | undefined): string {
  return port !== undefined && port > 0 ? String(Math.trunc(port)) : "";
}

/**
 * strconv.ParseInt(raw, 10, bits): optional sign and decimal digits within the signed range;
 * anything else yields undefined.
 */
export function parseGoInt(raw: string, bits: 32 | 64): number | undefined {
  if (!/^[+-]?[0-9]+$/.test(raw)) return undefined;
  const n = BigInt(raw);
  const limit = 1n << BigInt(bits - 1);
  if (n < -limit || n >= limit) return undefined;
  return Number(n);
}
