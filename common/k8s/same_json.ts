/**
 * Equality of values as they travel on the wire. The reconcilers compare what they computed with
 * what the server (or the cache) holds; a field left undefined in memory is absent on the wire,
 * so a plain structural comparison would see a change where the server sees none.
 *
 * @module
 */
import { jsonEqual } from "../../kube/patch.ts";

/** A JSON.parse reviver: normalises each value of the wire form before the comparison. */
export type WireReviver = (this: unknown, key: string, value: unknown) => unknown;

/**
 * Whether a and b read the same once serialised as JSON: members JSON leaves out (undefined,
 * functions) do not count, toJSON is honoured and key order is ignored. `reviver` normalises both
 * sides further, e.g. {@link emptyStringAbsent}.
 */
export function sameJson(a: unknown, b: unknown, reviver?: WireReviver): boolean {
  return jsonEqual(wireForm(a, reviver), wireForm(b, reviver));
}

/**
 * A reviver that treats an empty string member of an object as absent (array elements stay): the
 * API server's encoder leaves empty strings out of what it stores, where Go's typed comparison
 * sees "" on both sides.
 */
export function emptyStringAbsent(this: unknown, _key: string, value: unknown): unknown {
  return value === "" && !Array.isArray(this) ? undefined : value;
}

function wireForm(v: unknown, reviver?: WireReviver): unknown {
  const text = JSON.stringify(v);
  return text === undefined ? undefined : JSON.parse(text, reviver);
}
