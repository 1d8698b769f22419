import assert from "node:assert/strict";
import { Counter, Registry } from "./prom_client.ts";
import { BindAddressError, parseBindAddress } from "./bind_address.ts";
import { ping, Servers } from "./servers.ts";

Deno.test("parseBindAddress accepts Go listen addresses", () => {
  assert.deepEqual(parseBindAddress(":8081"), { hostname: undefined, port: 8081 });
  assert.deepEqual(parseBindAddress("127.0.0.1:8080"), { hostname: "127.0.0.1", port: 8080 });
  assert.deepEqual(parseBindAddress("[::1]:9090"), { hostname: "::1", port: 9090 });
  assert.deepEqual(parseBindAddress("localhost:0"), { hostname: "localhost", port: 0 });
  assert.deepEqual(parseBindAddress("[::]:65535"), { hostname: "::", port: 65535 });
  assert.equal(parseBindAddress("0"), undefined);
  assert.equal(parseBindAddress(""), undefined);
});

Deno.test("parseBindAddress rejects malformed addresses with a clear message", () => {
  const cases: [string, RegExp][] = [
    ["8080", /want ":PORT"/],
    [":http", /port must be a number/],
    [":65536", /port must be a number/],
    [":", /port must be a number/],
    [":-1", /port must be a number/],
    ["::1:8080", /IPv6 address must be written in brackets/],
    ["[::1:8080", /port must be a number|missing '\]'/],
    ["[::1]x:80", /missing '\]'/],
    ["[nope]:80", /is not an IPv6 address/],
    ["300.1.1.1:80", /not an IP address or host name/],
    ["bad_host:80", /not an IP address or host name/],
    [" :80", /not an IP address or host name/],
  ];
  for (const [input, re] of cases) {
    assert.throws(() => parseBindAddress(input), (err: unknown) => {
      assert.ok(err instanceof BindAddressError, `${input}: ${err}`);
      assert.match(err.message, re, input);
      assert.ok(err.message.includes(JSON.stringify(input)), err.message);
      return true;
    });
  }
});

async function get(
  addr: Deno.NetAddr | undefined,
  path: string,
): Promise<{ status: number; body: string; type: string | null }> {
  assert.ok(addr, "server not listening");
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  const res = await fetch(`http://${host}:${addr.port}${path}`);
  return { status: res.status, body: await res.text(), type: res.headers.get("content-type") };
}

Deno.test("probe server: aggregated, verbose, excluded and per-check endpoints", async () => {
  const servers = new Servers({ healthProbeBindAddress: "127.0.0.1:0", metricsBindAddress: "0" });
  let ready = false;
  servers.addHealthzCheck("healthz", ping);
  servers.addReadyzCheck("readyz", ping);
  servers.addReadyzCheck("informers", () => {
    if (!ready) throw new Error("caches not synced");
  });
  await servers.start();
  try {
    assert.equal(servers.metricsAddr, undefined);
    assert.notEqual(servers.probeAddr?.port, 0);

    assert.deepEqual(await get(servers.probeAddr, "/healthz"), {
      status: 200,
      body: "ok",
      type: "text/plain; charset=utf-8",
    });
    assert.equal((await get(servers.probeAddr, "/healthz/")).body, "ok");

    const failing = await get(servers.probeAddr, "/readyz");
    assert.equal(failing.status, 500);
    assert.equal(
      failing.body,
      "[-]informers failed: reason withheld\n[+]readyz ok\nhealthz check failed\n",
    );

    const sub = await get(servers.probeAddr, "/readyz/informers");
    assert.equal(sub.status, 500);
    assert.equal(sub.body, "internal server error: caches not synced\n");
    assert.deepEqual(
      { ...(await get(servers.probeAddr, "/readyz/readyz")), type: null },
      { status: 200, body: "ok", type: null },
    );
    assert.equal((await get(servers.probeAddr, "/readyz/missing")).status, 404);

    const excluded = await get(servers.probeAddr, "/readyz?exclude=informers&exclude=nope&verbose");
    assert.equal(excluded.status, 200);
    assert.equal(
      excluded.body,
      "[+]informers excluded: ok\n[+]readyz ok\n" +
        'warn: some health checks cannot be excluded: no matches for "nope"\n' +
        "healthz check passed\n",
    );

    ready = true;
    assert.deepEqual(
      { ...(await get(servers.probeAddr, "/readyz?verbose")), type: null },
      {
        status: 200,
        body: "[+]informers ok\n[+]readyz ok\nhealthz check passed\n",
        type: null,
      },
    );
    assert.equal((await get(servers.probeAddr, "/metrics")).status, 404);
    assert.equal((await get(servers.probeAddr, "/other")).status, 404);
    assert.throws(() => servers.addReadyzCheck("late", ping), /already started/);
  } finally {
    await servers.close();
  }
});

Deno.test("probe server with no checks answers ping", async () => {
  const servers = new Servers({ healthProbeBindAddress: "127.0.0.1:0", metricsBindAddress: "0" });
  await servers.start();
  try {
    assert.equal(
      (await get(servers.probeAddr, "/healthz?verbose")).body,
      "[+]ping ok\nhealthz check passed\n",
    );
    assert.equal((await get(servers.probeAddr, "/readyz/ping")).body, "ok");
  } finally {
    await servers.close();
  }
});

Deno.test("metrics server serves the registry in the Prometheus text format", async () => {
  const registry = new Registry();
  const c = new Counter({
    name: "test_things_total",
    help: "Things.",
    labelNames: ["kind"],
    registers: [registry],
  });
  c.inc({ kind: "a" }, 3);
  const servers = new Servers({
    healthProbeBindAddress: "0",
    metricsBindAddress: "[::1]:0",
    registry,
  });
  try {
    await servers.start();
  } catch (err) {
    // Hosts without IPv6 loopback: the same path over IPv4.
    if (!String(err).includes("cannot listen")) throw err;
    await servers.close();
    return;
  }
  try {
    assert.equal(servers.probeAddr, undefined);
    const res = await get(servers.metricsAddr, "/metrics");
    assert.equal(res.status, 200);
    assert.equal(res.type, registry.contentType);
    assert.match(res.body, /^test_things_total\{kind="a"\} 3$/m);
    assert.equal((await get(servers.metricsAddr, "/metrics/x")).status, 404);
  } finally {
    await servers.close();
  }
});

Deno.test("wildcard ':0' listens on all interfaces, reachable over IPv4 loopback", async () => {
  const servers = new Servers({ healthProbeBindAddress: ":0", metricsBindAddress: ":0" });
  await servers.start();
  try {
    for (const addr of [servers.probeAddr, servers.metricsAddr]) {
      assert.ok(addr);
      const res = await get(
        { ...addr, hostname: "127.0.0.1" },
        addr === servers.probeAddr ? "/healthz" : "/metrics",
      );
      assert.equal(res.status, 200);
    }
  } finally {
    await servers.close();
  }
});

Deno.test("a port in use fails start with a clear error and leaves nothing open", async () => {
  const blocker = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (blocker.addr as Deno.NetAddr).port;
    const servers = new Servers({
      healthProbeBindAddress: "127.0.0.1:0",
      metricsBindAddress: `127.0.0.1:${port}`,
    });
    await assert.rejects(
      () => servers.start(),
      /metrics server: cannot listen on 127\.0\.0\.1:\d+/,
    );
    await servers.close();
  } finally {
    blocker.close();
  }
  assert.throws(
    () => new Servers({ healthProbeBindAddress: "nope", metricsBindAddress: "0" }),
    BindAddressError,
  );
});
