/**
 * Which of two objects was created first: the one rule behind every "the earlier one wins" of the
 * operator, so the two places that need it cannot drift apart again — the CocoonSet that owns a
 * VM name sets of two namespaces derive (snapshotgate/claims.ts cameFirst) and the
 * CocoonHibernation that sets the direction of a VM other requests reach (hibernation/checks.ts).
 *
 * Times are compared as instants, not as text. creationTimestamp has one-second resolution, so
 * equal times are common; they are broken by "namespace/name", which gives the same answer in
 * every process and on every pass. A missing or unreadable time counts as latest: an object of
 * unknown age never outranks one whose age is known. A real API server stamps every object on
 * create (second resolution, UTC), so that case and the text-versus-instant difference only arise
 * for objects built by hand; on a server this order is the plain order of the stamps.
 *
 * @module
 */
import { parseRfc3339 } from "../../kube/time.ts";

/** What the order reads of an object (its metadata, or the same fields copied out). */
export interface CreationOrderKey {
  namespace?: string;
  name?: string;
  creationTimestamp?: string;
}

/** Negative when a was created before b, positive when after, 0 for the same object. */
export function compareCreation(a: CreationOrderKey, b: CreationOrderKey): number {
  const ta = parseRfc3339(a.creationTimestamp);
  const tb = parseRfc3339(b.creationTimestamp);
  if (ta !== tb) {
    if (ta === undefined) return 1;
    if (tb === undefined) return -1;
    return ta - tb;
  }
  const ka = `${a.namespace ?? ""}/${a.name ?? ""}`;
  const kb = `${b.namespace ?? ""}/${b.name ?? ""}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
