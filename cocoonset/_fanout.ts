/**
 * Bounded fan-out with errgroup semantics: at most `limit` calls in flight; the first failure
 * aborts the group's signal, no further call starts, the ones in flight are awaited, and the
 * first error is thrown.
 *
 * Items are pulled from the iterable one at a time as a call finishes, so a generator of work
 * (the missing slots of a scale-up) is never materialised: memory grows with `limit`, not with
 * the number of items.
 */
export async function forEachLimited<T>(
  items: Iterable<T>,
  limit: number,
  signal: AbortSignal,
  fn: (item: T, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const group = new AbortController();
  const groupSignal = AbortSignal.any([signal, group.signal]);
  let failure: { err: unknown } | undefined;
  const source = items[Symbol.iterator]();
  let exhausted = false;
  const take = (): { item: T } | undefined => {
    if (exhausted) return undefined;
    const r = source.next();
    if (r.done) {
      exhausted = true;
      return undefined;
    }
    return { item: r.value };
  };
  const worker = async () => {
    while (!failure && !groupSignal.aborted) {
      const next = take();
      if (!next) return;
      try {
        await fn(next.item, groupSignal);
      } catch (err) {
        if (!failure) {
          failure = { err };
          group.abort(err);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, worker));
  if (failure) throw failure.err;
  signal.throwIfAborted();
}
