import assert from "node:assert/strict";
import { oid, sequence, smallInteger, time, tlv, toPem, unsignedInteger } from "./der.ts";

const hex = (bytes: Uint8Array) =>
  Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

Deno.test("oid encodes multi-byte arcs in base 128", () => {
  assert.equal(hex(oid("1.2.840.10045.4.3.2")), "06082a8648ce3d040302");
  assert.equal(hex(oid("2.5.4.3")), "0603550403");
});

Deno.test("integers carry a sign byte only when the top bit is set", () => {
  assert.equal(hex(unsignedInteger(Uint8Array.of(0x7f))), "02017f");
  assert.equal(hex(unsignedInteger(Uint8Array.of(0x80))), "02020080");
  assert.equal(hex(unsignedInteger(Uint8Array.of(0, 0, 0x05))), "020105");
  assert.equal(hex(smallInteger(0)), "020100");
  assert.equal(hex(smallInteger(2)), "020102");
});

Deno.test("long contents use the multi-byte length form", () => {
  assert.equal(hex(tlv(0x04, new Uint8Array(200))).slice(0, 6), "0481c8");
  assert.equal(hex(tlv(0x04, new Uint8Array(300))).slice(0, 8), "0482012c");
  assert.equal(hex(sequence()), "3000");
});

Deno.test("time switches from UTCTime to GeneralizedTime in 2050", () => {
  const utc = time(new Date("2026-01-02T03:04:05.678Z"));
  assert.equal(utc[0], 0x17);
  assert.equal(new TextDecoder().decode(utc.subarray(2)), "260102030405Z");
  const gen = time(new Date("2051-01-02T03:04:05Z"));
  assert.equal(gen[0], 0x18);
  assert.equal(new TextDecoder().decode(gen.subarray(2)), "20510102030405Z");
});

Deno.test("toPem wraps base64 at 64 columns", () => {
  const pem = toPem("TEST", new Uint8Array(100));
  const lines = pem.trim().split("\n");
  assert.equal(lines[0], "-----BEGIN TEST-----");
  assert.equal(lines.at(-1), "-----END TEST-----");
  assert.equal(lines[1].length, 64);
});
