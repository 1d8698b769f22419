import assert from "node:assert/strict";
import { abortable, DeadlineError, withDeadline } from "./deadline.ts";

Deno.test("withDeadline aborts slow work with a DeadlineError naming the request", async () => {
  const err = await withDeadline(
    "GET x",
    20,
    undefined,
    (signal) =>
      new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(new Error("aborted")))
      ),
  ).catch((e: unknown) => e);
  assert.ok(err instanceof DeadlineError);
  assert.equal(err.message, "GET x: timed out after 20ms");
});

Deno.test("withDeadline follows the caller's signal and passes results through", async () => {
  assert.equal(await withDeadline("x", 1_000, undefined, () => Promise.resolve(42)), 42);
  const ac = new AbortController();
  const p = withDeadline(
    "x",
    60_000,
    ac.signal,
    (signal) =>
      new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(new Error("fetch aborted")))
      ),
  );
  ac.abort(new Error("shutdown"));
  await assert.rejects(p, /shutdown/);
  await assert.rejects(withDeadline("x", 1_000, ac.signal, () => Promise.resolve(1)), /shutdown/);
});

Deno.test("abortable lets one caller stop waiting while the shared work goes on", async () => {
  let finish!: (v: number) => void;
  const shared = new Promise<number>((r) => (finish = r));
  const ac = new AbortController();
  const a = abortable(shared, ac.signal);
  const b = abortable(shared, undefined);
  ac.abort(new Error("caller A gone"));
  await assert.rejects(a, /caller A gone/);
  finish(7);
  assert.equal(await b, 7);
  await assert.rejects(abortable(shared, ac.signal), /caller A gone/);
});
