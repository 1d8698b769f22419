import { deepCopy } from "./object.ts";
import type { JsonPatchOp } from "./client.ts";

/** Thrown when a JSON patch cannot be applied (bad path, failed test op). */
export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PatchError";
  }
}

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Applies an RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces. */
export function applyMergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return deepCopy(patch);
  const out: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

/** Builds the merge patch that turns `from` into `to` (null for removed keys). */
export function createMergePatch(from: Json, to: Json): Record<string, Json> {
  const patch: Record<string, Json> = {};
  const a = isObject(from) ? from : {};
  const b = isObject(to) ? to : {};
  // Own keys only: every object inherits "constructor", "toString", … from Object.prototype.
  for (const k of Object.keys(a)) if (!Object.hasOwn(b, k)) patch[k] = null;
  for (const [k, v] of Object.entries(b)) {
    const old = Object.hasOwn(a, k) ? a[k] : undefined;
    if (isObject(old) && isObject(v)) {
      const sub = createMergePatch(old, v);
      if (Object.keys(sub).length > 0) patch[k] = sub;
    } else if (!jsonEqual(old, v)) {
      patch[k] = deepCopy(v);
    }
  }
  return patch;
}

/** Structural equality of JSON values (key order ignored). */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

function parsePointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw new PatchError(`invalid JSON pointer "${path}"`);
  return path.slice(1).split("/").map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function arrayIndex(arr: Json[], token: string, forInsert: boolean): number {
  if (forInsert && token === "-") return arr.length;
  if (!/^(0|[1-9][0-9]*)$/.test(token)) throw new PatchError(`invalid array index "${token}"`);
  const i = Number(token);
  if (i > arr.length || (!forInsert && i === arr.length)) {
    throw new PatchError(`array index ${i} out of range`);
  }
  return i;
}

function resolveParent(doc: Json, tokens: string[], path: string): Json {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[arrayIndex(cur, t, false)];
    else if (isObject(cur) && Object.hasOwn(cur, t)) cur = cur[t];
    else throw new PatchError(`path "${path}" does not exist`);
  }
  return cur;
}

function getAt(doc: Json, path: string): Json {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return doc;
  const parent = resolveParent(doc, tokens, path);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent[arrayIndex(parent, last, false)];
  if (isObject(parent) && Object.hasOwn(parent, last)) return parent[last];
  throw new PatchError(`path "${path}" does not exist`);
}

function removeAt(doc: Json, path: string): Json {
  const tokens = parsePointer(path);
  if (tokens.length === 0) throw new PatchError("cannot remove the document root");
  const parent = resolveParent(doc, tokens, path);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent.splice(arrayIndex(parent, last, false), 1)[0];
  if (isObject(parent) && Object.hasOwn(parent, last)) {
    const v = parent[last];
    delete parent[last];
    return v;
  }
  throw new PatchError(`path "${path}" does not exist`);
}

function addAt(doc: Json, path: string, value: Json, replace: boolean): Json {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return value;
  const parent = resolveParent(doc, tokens, path);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    const i = arrayIndex(parent, last, !replace);
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else if (isObject(parent)) {
    if (replace && !Object.hasOwn(parent, last)) {
      throw new PatchError(`path "${path}" does not exist`);
    }
    parent[last] = value;
  } else {
    throw new PatchError(`path "${path}" does not exist`);
  }
  return doc;
}

/** Applies an RFC 6902 JSON patch to a copy of doc; throws PatchError on any failing op. */
export function applyJsonPatch(doc: Json, ops: JsonPatchOp[]): Json {
  let out = deepCopy(doc);
  for (const op of ops) {
    switch (op.op) {
      case "add":
        out = addAt(out, op.path, deepCopy(op.value), false);
        break;
      case "replace":
        out = addAt(out, op.path, deepCopy(op.value), true);
        break;
      case "remove":
        removeAt(out, op.path);
        break;
      case "move": {
        const v = removeAt(out, requireFrom(op));
        out = addAt(out, op.path, v, false);
        break;
      }
      case "copy":
        out = addAt(out, op.path, deepCopy(getAt(out, requireFrom(op))), false);
        break;
      case "test":
        if (!jsonEqual(getAt(out, op.path), op.value)) {
          throw new PatchError(`test operation failed at "${op.path}"`);
        }
        break;
      default:
        throw new PatchError(`unknown JSON patch operation "${(op as { op: string }).op}"`);
    }
  }
  return out;
}

function requireFrom(op: JsonPatchOp): string {
  if (op.from === undefined) throw new PatchError(`"${op.op}" needs "from"`);
  return op.from;
}
