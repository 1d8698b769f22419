import assert from "node:assert/strict";
import { FakeClock } from "./testing/fake_clock.ts";
import { Transport } from "./transport.ts";

/** A loopback server answering every request with handler's response. */
function serve(handler: (req: Request) => Response | Promise<Response>) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  return { server, url: `http://127.0.0.1:${server.addr.port}` };
}

// An uncleared timeout (AbortSignal.timeout's) would leave one timer per request of a burst,
// each firing 30 s later on an idle operator.
Deno.test("transport: a request's timeout is cleared once its answer is read", async () => {
  const clock = new FakeClock();
  const timedInFlight: number[] = [];
  const { server, url } = serve(() => {
    timedInFlight.push(clock.pendingTimers());
    return Response.json({ kind: "Status", status: "Success" });
  });
  const transport = new Transport({ server: url, timeoutMs: 60_000 }, clock);
  try {
    for (const method of ["GET", "POST"] as const) {
      const body = method === "POST" ? {} : undefined;
      const res = await transport.fetch({ method, path: "/api/v1/pods", body });
      assert.equal(timedInFlight.pop(), 1, `${method}: timed while in flight`);
      assert.equal(clock.pendingTimers(), 0, `${method}: no timer left once answered`);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { kind: "Status", status: "Success" });
    }
  } finally {
    transport.close();
    await server.shutdown();
  }
});

Deno.test("transport: the request timeout also bounds reading the body", async () => {
  let release = () => {};
  const stalled = new Promise<void>((resolve) => release = resolve);
  let answered = () => {};
  const headersSent = new Promise<void>((resolve) => answered = resolve);
  const { server, url } = serve(() => {
    // Headers at once, then a body that does not end until the test is over.
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new TextEncoder().encode('{"kind":'));
        answered();
        await stalled;
        c.close();
      },
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  });
  const clock = new FakeClock();
  const transport = new Transport({ server: url, timeoutMs: 30_000 }, clock);
  try {
    const read = (async () =>
      await (await transport.fetch({ method: "GET", path: "/api/v1/pods" })).text())();
    read.catch(() => {});
    await headersSent;
    clock.advance(30_000);
    await assert.rejects(read, (err: Error) => err.name === "TimeoutError");
    assert.equal(clock.pendingTimers(), 0);
  } finally {
    release();
    transport.close();
    await server.shutdown();
  }
});

Deno.test("transport: a watch is not timed", async () => {
  const clock = new FakeClock();
  let timedInFlight = -1;
  const { server, url } = serve(() => {
    timedInFlight = clock.pendingTimers();
    return new Response("", { status: 200 });
  });
  const transport = new Transport({ server: url, timeoutMs: 30_000 }, clock);
  try {
    const res = await transport.fetch({ method: "GET", path: "/api/v1/pods", stream: true });
    assert.equal(timedInFlight, 0, "no timer while the watch is open");
    await res.body?.cancel();
  } finally {
    transport.close();
    await server.shutdown();
  }
});
