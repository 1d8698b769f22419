/**
 * Bounded fan-out with errgroup semantics: at most `limit` calls in flight; the first failure
 * aborts the group's signal, no further call starts, the ones in flight are awaited, and the
 * first error is thrown.
 */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  signal: AbortSignal,
  fn: (item: T, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const group = new AbortController();
  const groupSignal = AbortSignal.any([signal, group.signal]);
  let failure: { err: unknown } | undefined;
  let next = 0;
  const worker = async () => {
    while (!failure && next < items.length && !groupSignal.aborted) {
      const item = items[next++];
      try {
        await fn(item, groupSignal);
      } catch (err) {
        if (!failure) {
          failure = { err };
          group.abort(err);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.err;
  signal.throwIfAborted();
}
