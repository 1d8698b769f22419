/**
 * A cleanup that outlives this Deno process: a small shell that polls whether we are still alive
 * and, once we are gone (even by SIGKILL, when no unload handler runs), kills every process named
 * by a pid file in a folder and removes whatever folders it was given. The control plane, the
 * registry and `deno task dev` use it so that no server they start can outlive them.
 *
 * A pid file holds one number. When that process leads its own process group (it was spawned
 * `detached`), the whole group is killed, so a launcher and the program it started go together.
 *
 * @module
 */

/** Options for {@linkcode spawnWatchdog}. */
export interface WatchdogOptions {
  /** Folder whose `*.pid` files name the processes to kill. */
  pidDir: string;
  /** Folders to remove after the kill (may include pidDir). */
  removeDirs?: string[];
  /**
   * Run in a session of its own, so a Ctrl-C typed in the terminal does not stop the watchdog
   * together with the process it guards.
   */
  detached?: boolean;
}

/** A running watchdog. */
export interface Watchdog {
  /** Ends the watchdog without it killing or removing anything (the owner cleaned up). */
  dismiss(): Promise<void>;
}

const script = [
  'while kill -0 "$WATCHDOG_PARENT" 2>/dev/null; do sleep 1; done',
  'for f in "$WATCHDOG_PIDS"/*.pid; do',
  '  [ -f "$f" ] || continue',
  '  p="$(cat "$f")"',
  '  kill -9 "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null',
  "done",
  'for d in "$@"; do rm -rf "$d"; done',
].join("\n");

/** Starts a watchdog for this process. Unref'd: it never keeps the event loop alive. */
export function spawnWatchdog(opts: WatchdogOptions): Watchdog {
  const child = new Deno.Command("sh", {
    args: ["-c", script, "watchdog", ...(opts.removeDirs ?? [])],
    env: { WATCHDOG_PARENT: String(Deno.pid), WATCHDOG_PIDS: opts.pidDir },
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: opts.detached ?? false,
  }).spawn();
  child.unref();
  let dismissed: Promise<void> | undefined;
  return {
    dismiss() {
      dismissed ??= (async () => {
        try {
          // Detached, it leads its own group: its `sleep` goes with it instead of lingering.
          if (opts.detached) Deno.kill(-child.pid, "SIGKILL");
          else child.kill("SIGKILL");
        } catch {
          // Already gone.
        }
        child.ref();
        await child.status;
      })();
      return dismissed;
    },
  };
}

/** Records `pid` as `<dir>/<name>.pid` for a watchdog; {@linkcode removePidFile} forgets it. */
export function writePidFile(dir: string, name: string, pid: number): void {
  Deno.writeTextFileSync(`${dir}/${name}.pid`, String(pid));
}

/** Forgets a pid file (the process exited by itself or was stopped); missing files are fine. */
export function removePidFile(dir: string, name: string): void {
  try {
    Deno.removeSync(`${dir}/${name}.pid`);
  } catch {
    // The folder is already gone.
  }
}
