/**
 * A small deterministic YAML emitter for JSON-shaped manifests (objects, arrays, strings,
 * finite numbers, booleans, null). Keys are sorted, block style throughout, sequences indented
 * like kubectl and controller-gen print them. Strings are written plain only when a YAML 1.1 or
 * 1.2 reader cannot mistake them for something else; multi-line strings become literal blocks;
 * anything doubtful is double-quoted with JSON escapes (valid YAML). Same input, same bytes.
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const INDENT = "  ";

/** Renders one YAML document (with a leading "---" marker) for a JSON value. */
export function toYamlDocument(value: unknown): string {
  return `---\n${toYaml(value)}`;
}

/** Renders a JSON value as YAML; the result ends with a newline. */
export function toYaml(value: unknown): string {
  const lines: string[] = [];
  emitValue(normalize(value), 0, lines);
  return lines.join("\n") + "\n";
}

/** Drops undefined members and rejects what JSON cannot carry. */
function normalize(value: unknown): Json {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`cannot render ${value} as YAML`);
    return value;
  }
  if (Array.isArray(value)) return value.map(normalize);
  if (typeof value === "object") {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (v !== undefined) out[k] = normalize(v);
    }
    return out;
  }
  throw new TypeError(`cannot render a ${typeof value} as YAML`);
}

function isObject(v: Json): v is { [k: string]: Json } {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Top-level value: a mapping or sequence at column 0, or a lone scalar. */
function emitValue(v: Json, depth: number, lines: string[]): void {
  if (isObject(v) && Object.keys(v).length > 0) emitMapping(v, depth, lines);
  else if (Array.isArray(v) && v.length > 0) emitSequence(v, depth, lines);
  else lines.push(INDENT.repeat(depth) + inlineScalar(v, depth));
}

function emitMapping(m: { [k: string]: Json }, depth: number, lines: string[]): void {
  const pad = INDENT.repeat(depth);
  for (const key of Object.keys(m).sort()) {
    lines.push(...entryLines(`${pad}${scalar(key)}:`, m[key], depth));
  }
}

function emitSequence(items: Json[], depth: number, lines: string[]): void {
  const pad = INDENT.repeat(depth);
  for (const item of items) {
    if (isObject(item) && Object.keys(item).length > 0) {
      // "- " then the first key on the same line; the rest aligned under it.
      const nested: string[] = [];
      emitMapping(item, depth + 1, nested);
      nested[0] = `${pad}- ${nested[0].slice(INDENT.length * (depth + 1))}`;
      lines.push(...nested);
    } else if (Array.isArray(item) && item.length > 0) {
      const nested: string[] = [];
      emitSequence(item, depth + 1, nested);
      nested[0] = `${pad}- ${nested[0].slice(INDENT.length * (depth + 1))}`;
      lines.push(...nested);
    } else {
      const text = inlineScalar(item, depth + 1);
      lines.push(`${pad}- ${text}`);
    }
  }
}

/** "key:" followed by the value: inline for scalars, on following lines for collections. */
function entryLines(head: string, v: Json, depth: number): string[] {
  const out: string[] = [];
  if (isObject(v) && Object.keys(v).length > 0) {
    out.push(head);
    emitMapping(v, depth + 1, out);
  } else if (Array.isArray(v) && v.length > 0) {
    // Sequences under a key sit at the key's own indentation, as kubectl prints them.
    out.push(head);
    emitSequence(v, depth, out);
  } else {
    out.push(`${head} ${inlineScalar(v, depth + 1)}`);
  }
  return out;
}

/** A scalar (or empty collection) in value position; literal blocks span several lines. */
function inlineScalar(v: Json, depth: number): string {
  if (Array.isArray(v)) return "[]";
  if (isObject(v)) return "{}";
  if (typeof v === "string" && canBeLiteralBlock(v)) {
    const pad = INDENT.repeat(depth);
    return "|-\n" + v.split("\n").map((l) => (l === "" ? "" : pad + l)).join("\n");
  }
  return scalar(v);
}

function scalar(v: Json): string {
  if (v === null) return "null";
  if (typeof v === "boolean" || typeof v === "number") return String(v);
  if (typeof v === "string") return isSafePlain(v) ? v : JSON.stringify(v);
  throw new TypeError("collections are not scalars");
}

/** Multi-line text that a literal block reproduces exactly ("|-" strips one final newline). */
function canBeLiteralBlock(s: string): boolean {
  return s.includes("\n") && !s.endsWith("\n") && !/^[ \t\n]/.test(s) &&
    // deno-lint-ignore no-control-regex
    !/[\x00-\x08\x0b-\x1f\x7f\r\t]/.test(s) && !/[ ]\n|[ ]$/.test(s);
}

const RESERVED = /^(?:~|null|true|false|yes|no|on|off|y|n)$/i;
const NUMBER_LIKE = /^[-+.]?[0-9]|^[-+]?\.(?:inf|nan)$/i;

/** Whether s can be written without quotes and read back as the same string. */
function isSafePlain(s: string): boolean {
  if (s === "" || s !== s.trim()) return false;
  if (RESERVED.test(s) || NUMBER_LIKE.test(s)) return false;
  // Indicators that may not start a plain scalar.
  if (/^[-?:,[\]{}#&*!|>'"%@`]/.test(s)) return false;
  if (s.includes(": ") || s.includes(" #") || s.endsWith(":")) return false;
  // Control characters, line breaks and non-ASCII go quoted to keep the output unambiguous.
  return /^[\x20-\x7e]+$/.test(s);
}
