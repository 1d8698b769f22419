/**
 * A long-lived child of `deno task dev` (the simulator, the operator's launcher): started in a
 * session of its own, its output streamed line by line under a name prefix, stopped on request
 * with a grace period and then killed together with everything it started.
 *
 * Why not tests/harness/process.ts: that helper keeps every byte a child writes (tests read it
 * back) and signals only the child itself. A dev session runs for hours and its operator is a
 * grandchild (scripts/start.ts launches it), so here output is passed on and forgotten, and the
 * whole process group is killed at the end.
 *
 * Why a session of its own: a Ctrl-C typed in the terminal is delivered to the terminal's whole
 * foreground process group. Outside it, the children hear only from the dev task, which stops
 * them one after another in its own order.
 *
 * @module
 */
import { removePidFile, writePidFile } from "../tests/harness/watchdog.ts";

/** How to start a child. */
export interface DevChildOptions {
  /** Short name: the log prefix and the name of its pid file. */
  name: string;
  command: string;
  args: string[];
  /** Environment changes over ours. */
  env?: Record<string, string>;
  cwd?: string;
  /** Folder of pid files a watchdog kills from if the dev task dies without cleaning up. */
  pidDir?: string;
  /** Receives each output line of the child (stdout and stderr), without its newline. */
  onLine: (line: string) => void;
}

/** A running child. */
export interface DevChild {
  readonly name: string;
  readonly pid: number;
  /** Settles when the child has exited and its output has been passed on. */
  readonly status: Promise<Deno.CommandStatus>;
  /** Resolves with the first output line matching `pattern`; rejects on exit or timeout. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string>;
  /**
   * SIGTERM to the child, SIGKILL to its whole process group after `graceMs`, and SIGKILL to the
   * group once the child is gone (a grandchild must not survive its launcher). Idempotent.
   */
  stop(graceMs: number): Promise<Deno.CommandStatus>;
}

interface LineWaiter {
  pattern: RegExp;
  resolve(line: string): void;
  reject(err: Error): void;
}

/** One line describing how a child ended, e.g. `exited with code 1` or `was killed by SIGKILL`. */
export function describeExit(status: Deno.CommandStatus): string {
  return status.signal ? `was killed by ${status.signal}` : `exited with code ${status.code}`;
}

/** Starts a child in its own session and streams its output to `onLine`. */
export function spawnDevChild(opts: DevChildOptions): DevChild {
  const child = new Deno.Command(opts.command, {
    args: opts.args,
    env: opts.env,
    cwd: opts.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }).spawn();
  // The child leads its own process group, so its pid names the group too.
  const group = child.pid;
  if (opts.pidDir) writePidFile(opts.pidDir, opts.name, group);
  const waiters = new Set<LineWaiter>();
  let exited = false;

  const line = (text: string) => {
    opts.onLine(text);
    for (const w of waiters) {
      if (w.pattern.test(text)) {
        waiters.delete(w);
        w.resolve(text);
      }
    }
  };
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + text).split("\n");
      rest = parts.pop() ?? "";
      for (const part of parts) line(part.replace(/\r$/, ""));
    }
    if (rest) line(rest);
  };

  const killGroup = () => {
    try {
      Deno.kill(-group, "SIGKILL");
    } catch {
      // The group is empty already.
    }
  };

  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  const status = (async () => {
    const result = await child.status;
    // A grandchild still holding the pipes would keep them open: once the child is gone, what
    // it started gets a moment to finish writing and is then killed.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      pumps,
      new Promise<void>((resolve) => timer = setTimeout(resolve, 2_000)),
    ]);
    clearTimeout(timer);
    killGroup();
    await pumps;
    exited = true;
    if (opts.pidDir) removePidFile(opts.pidDir, opts.name);
    for (const w of waiters) {
      w.reject(new Error(`${opts.name} ${describeExit(result)} before printing ${w.pattern}`));
    }
    waiters.clear();
    return result;
  })();

  let stopping: Promise<Deno.CommandStatus> | undefined;
  return {
    name: opts.name,
    pid: child.pid,
    status,
    waitForLine(pattern: RegExp, timeoutMs: number): Promise<string> {
      if (exited) return Promise.reject(new Error(`${opts.name} has exited`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`${opts.name} printed no line matching ${pattern} in ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter: LineWaiter = {
          pattern,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        waiters.add(waiter);
      });
    },
    stop(graceMs: number): Promise<Deno.CommandStatus> {
      stopping ??= (async () => {
        if (!exited) {
          try {
            child.kill("SIGTERM");
          } catch {
            // Exited between the check and the signal.
          }
        }
        const timer = setTimeout(killGroup, graceMs);
        try {
          return await status;
        } finally {
          clearTimeout(timer);
          killGroup();
        }
      })();
      return stopping;
    },
  };
}
