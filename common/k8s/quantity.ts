/**
 * Kubernetes resource quantities ("1Gi", "500m", "1e3", "100G"), ported from apimachinery's
 * resource.Quantity: the same grammar, the same value semantics (fixed point, never a float:
 * values are kept as an exact count of nano-units in a bigint), and the same canonical string,
 * so a storage size written to a pod annotation reads exactly as the Go operator wrote it.
 */

/** How a quantity prints: the suffix family it was written in. */
export type QuantityFormat = "DecimalExponent" | "BinarySI" | "DecimalSI";

/** Thrown for a string that is not a quantity. */
export class QuantityError extends Error {
  constructor(readonly input: string, reason: string) {
    super(`invalid quantity "${input}": ${reason}`);
    this.name = "QuantityError";
  }
}

const GRAMMAR = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";
const SUFFIX_CHARS = "eEinumkKMGTP";
const NANO = 1_000_000_000n;
const MAX_INT64 = (1n << 63n) - 1n;
/** Guard against absurd exponents ("1e999999999") that would build gigantic bigints. */
const MAX_EXPONENT = 4096;

const DECIMAL_SUFFIXES: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIXES: Record<string, number> = {
  Ki: 10,
  Mi: 20,
  Gi: 30,
  Ti: 40,
  Pi: 50,
  Ei: 60,
};
const DECIMAL_SUFFIX_BY_EXPONENT = new Map(
  Object.entries(DECIMAL_SUFFIXES).map(([s, e]) => [e, s] as const),
);
const BINARY_SUFFIX_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

interface Scanned {
  positive: boolean;
  /** Integer digits without leading zeros ("0" when there are none). */
  num: string;
  /** Fraction digits as written (may be ""). */
  denom: string;
  suffix: string;
}

/** Splits a quantity string into sign, digits and suffix, with apimachinery's scanner rules. */
function scan(str: string): Scanned {
  let pos = 0;
  const end = str.length;
  let positive = true;
  if (str[0] === "-") {
    positive = false;
    pos++;
  } else if (str[0] === "+") {
    pos++;
  }
  while (pos < end && str[pos] === "0") pos++;
  if (pos >= end) return { positive, num: "0", denom: "", suffix: "" };

  const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";
  let i = pos;
  while (i < end && isDigit(str[i])) i++;
  const num = str.slice(pos, i) || "0";
  pos = i;
  if (pos >= end) return { positive, num, denom: "", suffix: "" };

  let denom = "";
  if (str[pos] === ".") {
    pos++;
    i = pos;
    while (i < end && isDigit(str[i])) i++;
    denom = str.slice(pos, i);
    pos = i;
    if (pos >= end) return { positive, num, denom, suffix: "" };
  }

  const suffixStart = pos;
  while (pos < end && SUFFIX_CHARS.includes(str[pos])) pos++;
  if (pos < end && (str[pos] === "-" || str[pos] === "+")) pos++;
  while (pos < end && isDigit(str[pos])) pos++;
  if (pos < end) throw new QuantityError(str, `quantities must match ${GRAMMAR}`);
  return { positive, num, denom, suffix: str.slice(suffixStart) };
}

/** Maps a suffix to (base, exponent, format), or undefined when it is not a known suffix. */
function interpretSuffix(
  suffix: string,
): { base: 2 | 10; exponent: number; format: QuantityFormat } | undefined {
  if (Object.hasOwn(DECIMAL_SUFFIXES, suffix)) {
    return { base: 10, exponent: DECIMAL_SUFFIXES[suffix], format: "DecimalSI" };
  }
  if (Object.hasOwn(BINARY_SUFFIXES, suffix)) {
    return { base: 2, exponent: BINARY_SUFFIXES[suffix], format: "BinarySI" };
  }
  if (suffix.length > 1 && (suffix[0] === "e" || suffix[0] === "E")) {
    // strconv.ParseInt syntax: optional sign, decimal digits.
    if (!/^[+-]?[0-9]+$/.test(suffix.slice(1))) return undefined;
    const exponent = Number(suffix.slice(1));
    if (!Number.isSafeInteger(exponent)) return undefined;
    return { base: 10, exponent, format: "DecimalExponent" };
  }
  return undefined;
}

/** ceil(n / d) for n >= 0, d > 0. */
function ceilDiv(n: bigint, d: bigint): bigint {
  return (n + d - 1n) / d;
}

/**
 * Go keeps the caller's spelling (sign, leading zeros and all) when the parsed value is already
 * in canonical form; this reproduces that decision so toString() matches Quantity.String().
 */
function canonicalSpelling(
  s: Scanned,
  base: 2 | 10,
  exponent: number,
): boolean {
  const shifted = s.num + s.denom;
  if (base === 10) {
    const precision = 18 - (s.num.length + s.denom.length);
    const scale = exponent - s.denom.length;
    return precision >= 0 && scale >= -9 && scale % 3 === 0 && !shifted.endsWith("000") &&
      shifted[0] !== "0";
  }
  if (s.denom.length > 0) return false;
  const precision = 15 - s.num.length - Math.trunc((exponent * 3) / 10) - 1;
  if (precision < 0) return false;
  const value = BigInt(s.num);
  if (value << BigInt(exponent) > MAX_INT64) return false;
  return exponent % 10 === 0 && (value & 7n) !== 0n;
}

/** A parsed resource quantity. Immutable; compare with cmp/equals, print with toString. */
export class Quantity {
  /** The value in units of 10^-9 (exact). */
  readonly nanos: bigint;
  readonly format: QuantityFormat;
  readonly #spelling: string | undefined;

  private constructor(nanos: bigint, format: QuantityFormat, spelling?: string) {
    this.nanos = nanos;
    this.format = format;
    this.#spelling = spelling;
  }

  /** Parses a quantity string exactly as resource.ParseQuantity does; throws QuantityError. */
  static parse(str: string): Quantity {
    if (str.length === 0) throw new QuantityError(str, `quantities must match ${GRAMMAR}`);
    if (str === "0") return new Quantity(0n, "DecimalSI", str);
    const s = scan(str);
    const suffix = interpretSuffix(s.suffix);
    if (!suffix) throw new QuantityError(str, `unknown suffix "${s.suffix}"`);
    const { base, exponent } = suffix;
    let format = suffix.format;
    if (Math.abs(exponent) > MAX_EXPONENT) {
      throw new QuantityError(str, `exponent ${exponent} is out of the supported range`);
    }

    // value = digits * base^exponent / 10^len(denom); kept as ceil(|value| * 10^9).
    const digits = BigInt(s.num + s.denom);
    let abs: bigint;
    if (base === 10) {
      const shift = exponent - s.denom.length + 9;
      if (shift >= 0) abs = digits * 10n ** BigInt(shift);
      else if (digits === 0n) abs = 0n;
      else if (-shift > (s.num + s.denom).length) abs = 1n; // 0 < |value| < 1n rounds up to 1n
      else abs = ceilDiv(digits, 10n ** BigInt(-shift));
    } else {
      abs = ceilDiv(digits * (1n << BigInt(exponent)) * NANO, 10n ** BigInt(s.denom.length));
    }
    // Binary quantities are capped at the int64 range; decimal ones are not.
    if (format === "BinarySI" && abs > MAX_INT64 * NANO) abs = MAX_INT64 * NANO;
    if (format === "BinarySI" && abs > 0n && abs < NANO) format = "DecimalSI";
    const nanos = s.positive ? abs : -abs;
    const spelling = canonicalSpelling(s, base, exponent) ? str : undefined;
    return new Quantity(nanos, format, spelling);
  }

  /** Builds a quantity from an integer count of units (resource.NewQuantity). */
  static fromInteger(value: bigint | number, format: QuantityFormat = "DecimalSI"): Quantity {
    return new Quantity(BigInt(value) * NANO, format);
  }

  /** -1, 0 or 1 as this is less than, equal to or greater than other (by value only). */
  cmp(other: Quantity): -1 | 0 | 1 {
    return this.nanos < other.nanos ? -1 : this.nanos > other.nanos ? 1 : 0;
  }

  /** Value equality (1Gi equals 1024Mi). */
  equals(other: Quantity): boolean {
    return this.nanos === other.nanos;
  }

  isZero(): boolean {
    return this.nanos === 0n;
  }

  sign(): -1 | 0 | 1 {
    return this.nanos < 0n ? -1 : this.nanos > 0n ? 1 : 0;
  }

  /** The value rounded up (away from zero) to a whole unit, as Quantity.Value(). */
  value(): bigint {
    return this.scaledValue(0);
  }

  /** ceil(value * 1000), as Quantity.MilliValue(). */
  milliValue(): bigint {
    return this.scaledValue(-3);
  }

  private scaledValue(scale: number): bigint {
    const unit = 10n ** BigInt(9 + scale);
    const abs = this.nanos < 0n ? -this.nanos : this.nanos;
    const v = ceilDiv(abs, unit);
    return this.nanos < 0n ? -v : v;
  }

  /** The canonical string, as Quantity.String(): "1Gi", "500m", "100G", "1e3", "0". */
  toString(): string {
    if (this.#spelling !== undefined) return this.#spelling;
    if (this.nanos === 0n) return "0";
    let format = this.format;
    if (format === "BinarySI") {
      const abs = this.nanos < 0n ? -this.nanos : this.nanos;
      // Small or fractional binary values print as decimal rather than lose precision.
      if (abs < 1024n * NANO || abs % NANO !== 0n) format = "DecimalSI";
    }
    if (format === "BinarySI") {
      let units = this.nanos / NANO;
      let power = 0;
      while (units % 1024n === 0n) {
        units /= 1024n;
        power++;
      }
      return `${units}${BINARY_SUFFIX_BY_POWER[power]}`;
    }
    let mantissa = this.nanos;
    let exponent = -9;
    while (mantissa % 10n === 0n) {
      mantissa /= 10n;
      exponent++;
    }
    // The largest exponent that is a multiple of three and keeps the mantissa whole.
    while (((exponent % 3) + 3) % 3 !== 0) {
      mantissa *= 10n;
      exponent--;
    }
    if (format === "DecimalSI") {
      const suffix = DECIMAL_SUFFIX_BY_EXPONENT.get(exponent);
      // Past "E" there is no SI suffix; newer apimachinery falls back to exponent notation.
      if (suffix !== undefined) return `${mantissa}${suffix}`;
    }
    return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
  }

  toJSON(): string {
    return this.toString();
  }
}

/**
 * The spaces strings.TrimSpace removes that can reach Quantity.UnmarshalJSON unescaped in JSON
 * written by Go's encoder (control characters, U+2028 and U+2029 arrive as escapes, which the
 * grammar rejects anyway). U+FEFF is not among them.
 */
const JSON_TRIMMED_SPACE = "[ \u0085\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+";
const JSON_TRIM = new RegExp(`^${JSON_TRIMMED_SPACE}|${JSON_TRIMMED_SPACE}$`, "g");

/**
 * Parses a quantity as it appears in JSON: a string, or a number (int-or-string fields). Strings
 * lose surrounding spaces first, as Quantity.UnmarshalJSON does (ParseQuantity and
 * Quantity.parse do not). Numbers go through their JavaScript spelling, so 1e21 is read as
 * "1e+21".
 */
export function parseQuantity(value: string | number): Quantity {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new QuantityError(String(value), "not a finite number");
    return Quantity.parse(String(value));
  }
  return Quantity.parse(value.replace(JSON_TRIM, ""));
}

/** The canonical string of a quantity, or "" when it is absent (meta.QuantityString). */
export function quantityString(value: string | number | undefined | null): string {
  return value === undefined || value === null ? "" : parseQuantity(value).toString();
}

/** Compares two quantities by value: -1, 0 or 1. */
export function compareQuantities(a: string | number, b: string | number): -1 | 0 | 1 {
  return parseQuantity(a).cmp(parseQuantity(b));
}

/**
 * A resource list (limits or requests) with every quantity in canonical string form, as the Go
 * operator's typed ResourceList serialises when it copies a spec into a pod. Throws
 * QuantityError on an invalid value.
 */
export function canonicalResourceList(
  list: Readonly<Record<string, string | number>> | undefined,
): Record<string, string> | undefined {
  if (list === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(list)) out[name] = parseQuantity(value).toString();
  return out;
}
