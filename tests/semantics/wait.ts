/** Polls until check() returns a truthy value or the deadline passes (no bare sleeps in tests). */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | null | Promise<T | undefined | false | null>,
  timeoutMs = 10_000,
  intervalMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (true) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${lastError}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
