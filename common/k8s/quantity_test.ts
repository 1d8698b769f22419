import assert from "node:assert/strict";
import {
  canonicalResourceList,
  compareQuantities,
  parseQuantity,
  Quantity,
  QuantityError,
  type QuantityFormat,
  quantityString,
} from "./quantity.ts";

const NANO = 1_000_000_000n;

/** value as an exact decimal string → nanos. */
function nanosOf(decimal: string): bigint {
  const neg = decimal.startsWith("-");
  const [int, frac = ""] = decimal.replace("-", "").split(".");
  const n = BigInt(int) * NANO + BigInt((frac + "000000000").slice(0, 9));
  return neg ? -n : n;
}

Deno.test("parse: values and formats (apimachinery's table)", async (t) => {
  const cases: [string, string, QuantityFormat][] = [
    ["0", "0", "DecimalSI"],
    ["0n", "0", "DecimalSI"],
    ["0Ki", "0", "BinarySI"],
    ["0Ti", "0", "BinarySI"],
    ["1", "1", "DecimalSI"],
    ["1Ki", "1024", "BinarySI"],
    ["7Mi", String(7 * 1024 * 1024), "BinarySI"],
    ["6Gi", String(6 * 1024 ** 3), "BinarySI"],
    ["3Ei", String(3n * 1024n ** 6n), "BinarySI"],
    ["5n", "0.000000005", "DecimalSI"],
    ["4u", "0.000004", "DecimalSI"],
    ["3m", "0.003", "DecimalSI"],
    ["50k", "50000", "DecimalSI"],
    ["300T", "300000000000000", "DecimalSI"],
    ["1E", "1000000000000000000", "DecimalSI"],
    ["1E-3", "0.001", "DecimalExponent"],
    ["1e3", "1000", "DecimalExponent"],
    ["1.3E+6", "1300000", "DecimalExponent"],
    ["100.035k", "100035", "DecimalSI"],
    ["0.0005k", "0.5", "DecimalSI"],
    ["0.5e-2", "0.005", "DecimalExponent"],
    ["6.987654321G", "6987654321", "DecimalSI"],
    ["1.01E", "1010000000000000000", "DecimalSI"],
    // Finer than nano rounds away from zero.
    ["3.001n", "0.000000004", "DecimalSI"],
    ["1.1E-9", "0.000000002", "DecimalExponent"],
    ["0.0000000001", "0.000000001", "DecimalSI"],
    ["0.00000012345", "0.000000124", "DecimalSI"],
    // Binary quantities saturate at 2^63-1.
    ["9Ei", String((1n << 63n) - 1n), "BinarySI"],
    ["9223372036854775807Ki", String((1n << 63n) - 1n), "BinarySI"],
    ["12E", "12000000000000000000", "DecimalSI"],
    ["100.035Ki", "102435.84", "BinarySI"],
    ["0.5Mi", "524288", "BinarySI"],
    ["0.025Ti", "27487790694.4", "BinarySI"],
    // A binary value below one becomes decimal.
    ["0.000000000001Ki", "0.000000002", "DecimalSI"],
    [".001", "0.001", "DecimalSI"],
    ["1.", "1", "DecimalSI"],
    ["1.G", "1000000000", "DecimalSI"],
    ["-1.5", "-1.5", "DecimalSI"],
    ["+2Ki", "2048", "BinarySI"],
    // Go's scanner reads a missing number as zero.
    ["Gi", "0", "BinarySI"],
  ];
  for (const [input, value, format] of cases) {
    await t.step(input, () => {
      const q = Quantity.parse(input);
      assert.equal(q.nanos, nanosOf(value));
      assert.equal(q.format, format);
    });
  }
});

Deno.test("parse: invalid quantities throw a QuantityError naming the input", async (t) => {
  for (
    const input of [
      "",
      "1.1.M",
      "1+1.0M",
      "0.1mi",
      "0.1am",
      "aoeu",
      ".5i",
      "1i",
      "-3.01i",
      "-3.01e-",
      " 1",
      "1 ",
      "1ki",
      "1e",
    ]
  ) {
    await t.step(JSON.stringify(input), () => {
      assert.throws(() => Quantity.parse(input), (err: unknown) => {
        assert.ok(err instanceof QuantityError);
        assert.match(
          err.message,
          new RegExp(`invalid quantity "${input.replace(/[.+]/g, "\\$&")}"`),
        );
        return true;
      });
    });
  }
});

Deno.test("toString: canonical form as Quantity.String()", async (t) => {
  const cases: [string, string][] = [
    ["1Ki", "1Ki"],
    ["1Gi", "1Gi"],
    ["1024Mi", "1Gi"],
    ["1000M", "1G"],
    ["100Gi", "100Gi"],
    ["100G", "100G"],
    ["1.5Gi", "1536Mi"],
    ["0.5Gi", "512Mi"],
    ["1.5", "1500m"],
    ["0.5", "500m"],
    ["500m", "500m"],
    [".001Ki", "1024m"],
    [".000001Ki", "1024u"],
    [".000000001Ki", "1024n"],
    [".000000000001Ki", "2n"],
    ["0.1Ki", "102400m"],
    ["1000", "1k"],
    ["12000000", "12M"],
    ["1080n", "1080n"],
    ["80e-3", "80e-3"],
    ["300e6", "300e6"],
    ["1e3", "1e3"],
    [".001e12", "1e9"],
    ["0.001e0", "1e-3"],
    ["1000e-12", "1e-9"],
    ["1000e0", "1e3"],
    ["00", "0"],
    ["-0", "0"],
    ["0Gi", "0"],
    ["-0.5", "-500m"],
    ["-1024Mi", "-1Gi"],
    ["1.0", "1"],
    ["1025Ki", "1025Ki"],
    ["1536Mi", "1536Mi"],
    ["8Ei", "9223372036854775807"],
    // Past "E" there is no suffix: exponent notation keeps the value.
    ["1000E", "1e21"],
    // Go keeps the caller's spelling when the value is already canonical.
    ["+1Gi", "+1Gi"],
    ["05", "05"],
    ["1.G", "1.G"],
  ];
  for (const [input, want] of cases) {
    await t.step(`${input} → ${want}`, () => assert.equal(Quantity.parse(input).toString(), want));
  }
});

Deno.test("toString output parses back to the same value", () => {
  for (const input of ["1.5Gi", "0.025Ti", "100.035Ki", "3.001n", "12E", "-7.5M", "1.3E+6"]) {
    const q = Quantity.parse(input);
    assert.equal(Quantity.parse(q.toString()).nanos, q.nanos, input);
  }
});

Deno.test("cmp compares by exact value", () => {
  const cmp = (a: string, b: string) => Quantity.parse(a).cmp(Quantity.parse(b));
  assert.equal(cmp("0", "0"), 0);
  assert.equal(cmp("100m", "50m"), 1);
  assert.equal(cmp("50m", "100m"), -1);
  assert.equal(cmp("10000T", "100Gi"), 1);
  assert.equal(cmp("1Gi", "1024Mi"), 0);
  assert.equal(cmp("1G", "1000M"), 0);
  assert.equal(cmp("1Gi", "1G"), 1);
  assert.equal(cmp("1", "1000m"), 0);
  assert.equal(cmp("0.1", "100m"), 0);
  // 2^53 + 1 is not a float; the comparison must still see the difference.
  assert.equal(cmp("9007199254740993", "9007199254740992"), 1);
  assert.ok(Quantity.parse("2Gi").equals(Quantity.parse("2048Mi")));
  assert.equal(compareQuantities("1Gi", 1073741824), 0);
});

Deno.test("value and milliValue round up away from zero", () => {
  assert.equal(Quantity.parse("1.5").value(), 2n);
  assert.equal(Quantity.parse("-1.5").value(), -2n);
  assert.equal(Quantity.parse("1.5").milliValue(), 1500n);
  assert.equal(Quantity.parse("1n").milliValue(), 1n);
  assert.equal(Quantity.parse("1Ki").value(), 1024n);
});

Deno.test("isZero, sign, fromInteger", () => {
  assert.ok(Quantity.parse("0Mi").isZero());
  assert.equal(Quantity.parse("-1m").sign(), -1);
  assert.equal(Quantity.parse("1m").sign(), 1);
  assert.equal(Quantity.fromInteger(1024, "BinarySI").toString(), "1Ki");
  assert.equal(Quantity.fromInteger(1234000).toString(), "1234k");
  assert.equal(Quantity.fromInteger(1).toString(), "1");
});

Deno.test("parseQuantity accepts JSON numbers; quantityString handles absence", () => {
  assert.equal(parseQuantity(100).toString(), "100");
  assert.equal(parseQuantity(1.5).toString(), "1500m");
  assert.equal(parseQuantity(1073741824).cmp(Quantity.parse("1Gi")), 0);
  assert.throws(() => parseQuantity(Number.NaN), QuantityError);
  assert.equal(quantityString(undefined), "");
  assert.equal(quantityString(null), "");
  assert.equal(quantityString("1024Mi"), "1Gi");
  assert.equal(JSON.stringify({ q: Quantity.parse("1024Mi") }), '{"q":"1Gi"}');
});

Deno.test("canonicalResourceList renders every quantity as a canonical string", () => {
  assert.deepEqual(
    canonicalResourceList({ cpu: 2, memory: "2048Mi", "ephemeral-storage": "1.5" }),
    {
      cpu: "2",
      memory: "2Gi",
      "ephemeral-storage": "1500m",
    },
  );
  assert.equal(canonicalResourceList(undefined), undefined);
  assert.throws(() => canonicalResourceList({ cpu: "lots" }), QuantityError);
});

Deno.test("parseQuantity trims the spaces Quantity.UnmarshalJSON trims; Quantity.parse does not", async (t) => {
  // Go unquotes the raw JSON text and applies strings.TrimSpace; ParseQuantity itself is strict.
  const trimmed: [string, string][] = [
    [" 100Gi ", "100Gi"],
    ["\u00a01Gi\u3000", "1Gi"],
    ["\u00851.5Gi\u202f", "1536Mi"],
  ];
  for (const [input, want] of trimmed) {
    await t.step(JSON.stringify(input), () => {
      assert.equal(parseQuantity(input).toString(), want);
      assert.equal(quantityString(input), want);
      assert.throws(() => Quantity.parse(input), QuantityError);
    });
  }
  // Control characters reach Go as JSON escapes ("\t"), which the quantity grammar rejects;
  // U+FEFF is not a space to Go.
  for (const input of ["\t1Gi", "1Gi\n", "\ufeff1Gi", " ", "\u2028"]) {
    await t.step(`${JSON.stringify(input)} is rejected`, () => {
      assert.throws(() => parseQuantity(input), QuantityError);
    });
  }
  assert.deepEqual(canonicalResourceList({ memory: " 1024Mi" }), { memory: "1Gi" });
});
