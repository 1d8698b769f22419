/**
 * The `shardSelector` list/watch parameter of Kubernetes v1.36 (KEP-5866, feature gate
 * `ShardedListAndWatch`, alpha) and a client-side predicate that answers as the server does.
 *
 * Wire form, as the server's parser (k8s.io/apiserver pkg/sharding) accepts it:
 * `shardRange(object.metadata.namespace, '0x…', '0x…')`, several joined by `||`, all on the same
 * field. Bounds are "0x" plus exactly 16 lowercase hex digits, or "0x10000000000000000" (2^64)
 * for the end of the space; start is inclusive, end exclusive, start < end. The server rejects
 * the short forms its own API documentation shows ('0x0'). A list answered with the selector
 * applied carries `metadata.shardInfo.selector`, the server's re-rendering of the parsed
 * selector (ranges in request order, `, ` between arguments, single quotes); an older server or
 * one with the gate off ignores the parameter and omits shardInfo.
 *
 * The server's parser is a CEL parser whose AST is walked; {@linkcode parseShardSelector} is a
 * small hand parser for the same grammar subset (paths, string literals in either quote, `||`),
 * enough to read back the server's echo and to reject what the server rejects in the cases the
 * test vectors cover. It is not a CEL implementation.
 *
 * @module
 */

import { fnv1a64 } from "./hash.ts";
import {
  formatBound,
  type HashRange,
  normalize,
  parseBound,
  type RangeSet,
  setContains,
} from "./range.ts";

/** The fields the server can shard by. */
export type ShardField = "object.metadata.namespace" | "object.metadata.uid";

/** What the operator shards by: everything one reconcile touches shares a namespace. */
export const NAMESPACE_FIELD: ShardField = "object.metadata.namespace";

/** A parsed selector: one field, the ranges in the order written (not merged). */
export interface ShardSelector {
  readonly field: ShardField;
  readonly ranges: readonly HashRange[];
}

/**
 * The selector text for `set` on `field`, ranges merged and in ascending order. Throws on the
 * empty set: no selector means "nothing", and omitting the parameter means "everything".
 */
export function formatShardSelector(set: RangeSet, field: ShardField = NAMESPACE_FIELD): string {
  const ranges = normalize(set);
  if (ranges.length === 0) throw new RangeError("an empty range set has no shard selector");
  return renderShardSelector({ field, ranges });
}

/** The server's String(): each range in order, joined by " || ". */
export function renderShardSelector(selector: ShardSelector): string {
  return selector.ranges.map((r) =>
    `shardRange(${selector.field}, '${formatBound(r.start)}', '${formatBound(r.end)}')`
  ).join(" || ");
}

/** True when the object with this namespace (or uid) is in the selector, as the server decides. */
export function selectorMatches(selector: ShardSelector, fieldValue: string): boolean {
  return setContains(selector.ranges, fnv1a64(fieldValue));
}

/** True when a namespace's hash falls in `set`: the client-side filter for a replica's ranges. */
export function namespaceInRanges(set: RangeSet, namespace: string): boolean {
  return setContains(set, fnv1a64(namespace));
}

type Token =
  | { kind: "ident"; text: string }
  | { kind: "string"; text: string }
  | { kind: "punct"; text: "(" | ")" | "," | "." | "||" };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === "(" || c === ")" || c === "," || c === ".") {
      tokens.push({ kind: "punct", text: c });
      i++;
    } else if (c === "|" && text[i + 1] === "|") {
      tokens.push({ kind: "punct", text: "||" });
      i += 2;
    } else if (c === "'" || c === '"') {
      const close = text.indexOf(c, i + 1);
      if (close < 0) throw new SyntaxError(`unterminated string at offset ${i}`);
      const body = text.slice(i + 1, close);
      if (body.includes("\\")) {
        throw new SyntaxError("escapes in string literals are not supported");
      }
      tokens.push({ kind: "string", text: body });
      i = close + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < text.length && /[A-Za-z0-9_]/.test(text[j])) j++;
      tokens.push({ kind: "ident", text: text.slice(i, j) });
      i = j;
    } else {
      throw new SyntaxError(`unexpected ${JSON.stringify(c)} at offset ${i}`);
    }
  }
  return tokens;
}

/**
 * Parses selector text with the server's rules; throws a SyntaxError naming the problem for
 * anything the server would refuse (empty text, another function or operator, an unsupported
 * field, mixed fields, a bound not in the strict form, start >= end).
 */
export function parseShardSelector(text: string): ShardSelector {
  if (text.trim() === "") {
    throw new SyntaxError("empty shard selector (omit the parameter for unfiltered lists)");
  }
  const tokens = tokenize(text);
  let pos = 0;
  const next = (): Token | undefined => tokens[pos++];
  const expectPunct = (p: string) => {
    const t = next();
    if (t?.kind !== "punct" || t.text !== p) {
      throw new SyntaxError(
        `expected ${JSON.stringify(p)}, got ${t ? JSON.stringify(t.text) : "end"}`,
      );
    }
  };
  const bound = (): bigint => {
    const t = next();
    if (t?.kind !== "string") throw new SyntaxError("shardRange() bounds must be string literals");
    return parseBound(t.text);
  };
  const ranges: HashRange[] = [];
  let field: ShardField | undefined;
  for (;;) {
    const fn = next();
    if (fn?.kind !== "ident" || fn.text !== "shardRange") {
      throw new SyntaxError("only shardRange() calls joined by || are allowed");
    }
    expectPunct("(");
    const path: string[] = [];
    for (;;) {
      const part = next();
      if (part?.kind !== "ident") {
        throw new SyntaxError("shardRange() first argument must be a field path");
      }
      path.push(part.text);
      if (tokens[pos]?.kind === "punct" && tokens[pos].text === ".") pos++;
      else break;
    }
    const key = path.join(".");
    if (key !== "object.metadata.namespace" && key !== "object.metadata.uid") {
      throw new SyntaxError(`unsupported shard field ${JSON.stringify(key)}`);
    }
    if (field !== undefined && field !== key) {
      throw new SyntaxError(`all shard ranges must use one field, got ${field} and ${key}`);
    }
    field = key;
    expectPunct(",");
    const start = bound();
    expectPunct(",");
    const end = bound();
    expectPunct(")");
    if (start >= end) {
      throw new SyntaxError(
        `shard range start ${formatBound(start)} must be less than end ${formatBound(end)}`,
      );
    }
    ranges.push({ start, end });
    const t = next();
    if (t === undefined) break;
    if (t.kind !== "punct" || t.text !== "||") {
      throw new SyntaxError(`expected || or end, got ${JSON.stringify(t.text)}`);
    }
  }
  return { field: field!, ranges };
}

/**
 * Whether a list response was filtered by the server with `requested`: its
 * `metadata.shardInfo.selector` must be there and name the same field and ranges. An older
 * server, or one with the ShardedListAndWatch gate off, ignores the parameter and sends no
 * shardInfo: the caller must then filter on the client (watch events carry no shardInfo, so a
 * watch is trusted only when the list before it was).
 */
export function serverAppliedShard(
  listMetadata: { shardInfo?: { selector?: unknown } } | undefined,
  requested: ShardSelector,
): boolean {
  const echoed = listMetadata?.shardInfo?.selector;
  if (typeof echoed !== "string") return false;
  let parsed: ShardSelector;
  try {
    parsed = parseShardSelector(echoed);
  } catch {
    return false;
  }
  return parsed.field === requested.field &&
    parsed.ranges.length === requested.ranges.length &&
    parsed.ranges.every((r, i) =>
      r.start === requested.ranges[i].start && r.end === requested.ranges[i].end
    );
}
