/**
 * Runs a program (typically the operator, `deno run ... main.ts`) as a child process for
 * integration tests: collects its output, copies it to a log file for post-mortems, and lets a
 * test wait until a line shows up.
 *
 * @module
 */

/** How to start the child. */
export interface RunProcessOptions {
  /** Extra environment, merged over ours. */
  env?: Record<string, string>;
  /** Sets `KUBECONFIG` for the child. */
  kubeconfig?: string;
  cwd?: string;
  /** Where to copy stdout and stderr; a fresh temp file when absent (kept for inspection). */
  logFile?: string;
}

/** A running child process. */
export interface ProcessHandle {
  readonly pid: number;
  /** Settles once the child has exited and its output has been fully read. */
  readonly status: Promise<Deno.CommandStatus>;
  /** Everything the child wrote to stdout so far. */
  readonly stdout: string;
  /** Everything the child wrote to stderr so far. */
  readonly stderr: string;
  /** stdout and stderr interleaved in arrival order. */
  readonly output: string;
  readonly logFile: string;
  /** Sends a signal; a no-op once the child has exited. */
  kill(signal?: Deno.Signal): void;
  /** Resolves with the first match of `pattern` in the combined output. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit status. */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
}

interface Waiter {
  pattern: RegExp;
  resolve(match: RegExpMatchArray): void;
  reject(err: Error): void;
}

/** Starts `cmd` (program plus arguments) and returns a handle on it. */
export async function runProcess(
  cmd: string[],
  opts: RunProcessOptions = {},
): Promise<ProcessHandle> {
  if (cmd.length === 0) throw new Error("runProcess: empty command");
  const logFile = opts.logFile ?? await Deno.makeTempFile({ prefix: "proc-", suffix: ".log" });
  const log = await Deno.open(logFile, { write: true, create: true, append: true });
  const env = { ...opts.env, ...(opts.kubeconfig ? { KUBECONFIG: opts.kubeconfig } : {}) };
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    cwd: opts.cwd,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();

  let stdout = "";
  let stderr = "";
  let output = "";
  let exited = false;
  const waiters = new Set<Waiter>();

  const settle = () => {
    for (const w of waiters) {
      const match = output.match(w.pattern);
      if (match) {
        waiters.delete(w);
        w.resolve(match);
      }
    }
  };

  const pump = async (stream: ReadableStream<Uint8Array>, which: "stdout" | "stderr") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      await log.write(chunk);
      const text = decoder.decode(chunk, { stream: true });
      if (which === "stdout") stdout += text;
      else stderr += text;
      output += text;
      settle();
    }
  };

  const tail = () => `--- last output (${logFile}) ---\n${output.slice(-3000)}`;

  const status = (async () => {
    try {
      const [result] = await Promise.all([
        child.status,
        pump(child.stdout, "stdout"),
        pump(child.stderr, "stderr"),
      ]);
      return result;
    } finally {
      exited = true;
      log.close();
      for (const w of waiters) {
        w.reject(new Error(`process ${cmd[0]} exited before printing ${w.pattern}\n${tail()}`));
      }
      waiters.clear();
    }
  })();

  const kill = (signal: Deno.Signal = "SIGTERM") => {
    if (exited) return;
    try {
      child.kill(signal);
    } catch {
      // Already gone between the check and the signal.
    }
  };

  return {
    pid: child.pid,
    status,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    get output() {
      return output;
    },
    logFile,
    kill,
    waitForOutput(pattern: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
      const already = output.match(pattern);
      if (already) return Promise.resolve(already);
      if (exited) {
        return Promise.reject(new Error(`process ${cmd[0]} has exited\n${tail()}`));
      }
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${pattern}\n${tail()}`));
        }, timeoutMs);
        const waiter: Waiter = {
          pattern,
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        waiters.add(waiter);
      });
    },
    async stop(graceMs = 10_000): Promise<Deno.CommandStatus> {
      kill("SIGTERM");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const escalate = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          kill("SIGKILL");
          resolve();
        }, graceMs);
      });
      try {
        await Promise.race([status, escalate]);
        return await status;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
