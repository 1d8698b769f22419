/**
 * A TCP listener that records what clients send it: as a stand-in proxy it accepts and closes
 * (nothing gets through), as a forwarder it relays to a target while keeping a copy of the
 * client's bytes. Tests use it to prove that nothing (or no credential) reached a host.
 *
 * @module
 */

/** A running recorder. */
export interface TcpRecorder {
  /** `host:port` it listens on. */
  readonly host: string;
  /** Connections accepted so far. */
  connections(): number;
  /** Everything clients sent, decoded as latin-1 (HTTP headers are ASCII). */
  received(): string;
  close(): void;
}

/**
 * Listens on hostname (default loopback); with `forwardTo` (`host:port`) each connection is
 * relayed there, otherwise it is closed right away after reading what arrives at once.
 */
export function startTcpRecorder(
  opts: { hostname?: string; forwardTo?: string } = {},
): TcpRecorder {
  const listener = Deno.listen({ hostname: opts.hostname ?? "127.0.0.1", port: 0 });
  let connections = 0;
  let received = "";
  const conns = new Set<Deno.Conn>();
  const record = (chunk: Uint8Array) => {
    received += String.fromCharCode(...chunk);
  };
  (async () => {
    for await (const conn of listener) {
      connections++;
      conns.add(conn);
      handle(conn).catch(() => {}).finally(() => {
        conns.delete(conn);
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      });
    }
  })().catch(() => {});

  async function handle(conn: Deno.Conn): Promise<void> {
    if (!opts.forwardTo) {
      const buf = new Uint8Array(16 * 1024);
      const n = await Promise.race([
        conn.read(buf),
        new Promise<null>((r) => setTimeout(() => r(null), 500)),
      ]);
      if (n) record(buf.subarray(0, n));
      return;
    }
    const [hostname, port] = opts.forwardTo.split(/:(?=\d+$)/);
    const upstream = await Deno.connect({ hostname, port: Number(port) });
    try {
      const up = (async () => {
        const buf = new Uint8Array(16 * 1024);
        for (;;) {
          const n = await conn.read(buf);
          if (n === null) break;
          record(buf.subarray(0, n));
          await writeAll(upstream, buf.subarray(0, n));
        }
        await upstream.closeWrite().catch(() => {});
      })();
      const down = (async () => {
        const buf = new Uint8Array(16 * 1024);
        for (;;) {
          const n = await upstream.read(buf);
          if (n === null) break;
          await writeAll(conn, buf.subarray(0, n));
        }
      })();
      await Promise.allSettled([up, down]);
    } finally {
      upstream.close();
    }
  }

  const addr = listener.addr as Deno.NetAddr;
  return {
    host: `${addr.hostname}:${addr.port}`,
    connections: () => connections,
    received: () => received,
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // Already closed.
        }
      }
    },
  };
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  for (let off = 0; off < data.length;) off += await conn.write(data.subarray(off));
}

/** A non-loopback address of this machine, if it has one (traffic to it still stays local). */
export function nonLoopbackAddress(): string | undefined {
  try {
    return Deno.networkInterfaces().find((i) =>
      i.family === "IPv4" && !i.address.startsWith("127.")
    )?.address;
  } catch {
    return undefined;
  }
}
