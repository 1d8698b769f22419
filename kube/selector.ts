import type { LabelSelector } from "./client.ts";

/** One parsed label requirement. */
export interface Requirement {
  key: string;
  op: "=" | "!=" | "in" | "notin" | "exists" | "!";
  values: string[];
}

/** A parsed label selector: all requirements must hold. */
export interface ParsedSelector {
  requirements: Requirement[];
  /** The canonical string form, as sent to the API server. */
  text: string;
}

/** DNS-1123 subdomain labels joined by dots (the optional key prefix), then "/" and the name. */
const KEY_PATTERN =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE_PATTERN = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/**
 * Whether value can be a label value (at most 63 characters of alphanumerics, '-', '_' and '.',
 * starting and ending alphanumeric, or empty): the API server stores no other, and refuses a
 * selector naming one.
 */
export function isValidLabelValue(value: string): boolean {
  return value.length <= 63 && VALUE_PATTERN.test(value);
}

/** Splits on commas that are not inside parentheses. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms.map((t) => t.trim()).filter((t) => t.length > 0);
}

function checkKey(key: string, source: string): string {
  const slash = key.indexOf("/");
  const prefix = slash < 0 ? "" : key.slice(0, slash);
  const name = key.slice(slash + 1);
  // The API server bounds the DNS-subdomain prefix at 253 characters and the name at 63.
  if (!KEY_PATTERN.test(key) || prefix.length > 253 || name.length > 63) {
    throw new Error(`invalid label selector "${source}": bad key "${key}"`);
  }
  return key;
}

function checkValue(value: string, source: string): string {
  if (!isValidLabelValue(value)) {
    throw new Error(`invalid label selector "${source}": bad value "${value}"`);
  }
  return value;
}

function parseTerm(term: string, source: string): Requirement {
  const setMatch = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(term);
  if (setMatch) {
    // "in ()" would otherwise parse as the one empty value; the API server refuses it.
    if (setMatch[3].trim() === "") {
      throw new Error(`invalid label selector "${source}": empty value set in "${term}"`);
    }
    const values = setMatch[3].split(",").map((v) => checkValue(v.trim(), source));
    return { key: checkKey(setMatch[1], source), op: setMatch[2] as "in" | "notin", values };
  }
  const cmp = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
  if (cmp) {
    return {
      key: checkKey(cmp[1], source),
      op: cmp[2] === "!=" ? "!=" : "=",
      values: [checkValue(cmp[3].trim(), source)],
    };
  }
  if (term.startsWith("!")) {
    return { key: checkKey(term.slice(1).trim(), source), op: "!", values: [] };
  }
  return { key: checkKey(term, source), op: "exists", values: [] };
}

function requirementText(r: Requirement): string {
  switch (r.op) {
    case "=":
    case "!=":
      return `${r.key}${r.op}${r.values[0]}`;
    case "in":
    case "notin":
      return `${r.key} ${r.op} (${[...r.values].sort().join(",")})`;
    case "exists":
      return r.key;
    case "!":
      return `!${r.key}`;
  }
}

/** Parses a selector string or equality map; throws a clear error on bad syntax. */
export function parseLabelSelector(selector: LabelSelector | undefined): ParsedSelector {
  if (selector === undefined) return { requirements: [], text: "" };
  const requirements = typeof selector === "string"
    ? splitTerms(selector).map((t) => parseTerm(t, selector))
    : Object.entries(selector).map(([key, value]): Requirement => ({
      key: checkKey(key, JSON.stringify(selector)),
      op: "=",
      values: [checkValue(value, JSON.stringify(selector))],
    }));
  requirements.sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  return { requirements, text: requirements.map(requirementText).join(",") };
}

/** The selector in the API server's query-string form. */
export function labelSelectorString(selector: LabelSelector | undefined): string {
  return parseLabelSelector(selector).text;
}

/** True when the labels satisfy every requirement. */
export function matchesLabels(
  selector: ParsedSelector,
  labels: Record<string, string> | undefined,
): boolean {
  const l = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case "=":
        return has && v === r.values[0];
      case "!=":
        return !has || v !== r.values[0];
      case "in":
        return has && r.values.includes(v);
      case "notin":
        return !has || !r.values.includes(v);
      case "exists":
        return has;
      case "!":
        return !has;
    }
  });
}

/** One field requirement: exact match or mismatch on a dotted path. */
export interface FieldRequirement {
  field: string;
  op: "=" | "!=";
  value: string;
}

/** Parses "a.b=c,d!=e" field selectors. */
export function parseFieldSelector(text: string | undefined): FieldRequirement[] {
  if (!text) return [];
  return splitTerms(text).map((term) => {
    const m = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!m) throw new Error(`invalid field selector "${text}": bad term "${term}"`);
    return { field: m[1].trim(), op: m[2] === "!=" ? "!=" : "=", value: m[3].trim() };
  });
}

/** Builds a field selector string from exact-match pairs. */
export function fieldSelectorString(fields: Record<string, string> | undefined): string {
  return Object.entries(fields ?? {}).map(([k, v]) => `${k}=${v}`).join(",");
}

/** Reads a dotted path ("spec.nodeName") from a JSON object, as a string ("" when absent). */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object") return "";
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return "";
  return typeof cur === "string" ? cur : String(cur);
}

/** True when obj satisfies all field requirements. */
export function matchesFields(obj: unknown, reqs: FieldRequirement[]): boolean {
  return reqs.every((r) => (fieldValue(obj, r.field) === r.value) === (r.op === "="));
}
