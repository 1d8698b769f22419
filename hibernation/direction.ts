/**
 * The way a request's passes move its VM. Usually its desire; but a request whose desire was
 * reversed mid-transition first finishes the transition in flight — Hibernate while Waking keeps
 * waking until Active, Wake while Hibernating keeps hibernating until Hibernated (or Failed) —
 * because the previous round's tag and lifecycle annotations would otherwise read as the new
 * round's completion. The step a pass runs and the side a request takes among several requests
 * on one VM both follow this direction.
 *
 * @module
 */
import {
  COCOON_HIBERNATION_PHASE_HIBERNATING,
  COCOON_HIBERNATION_PHASE_WAKING,
  type CocoonHibernation,
  HIBERNATION_DESIRE_HIBERNATE,
  HIBERNATION_DESIRE_WAKE,
  type HibernationDesire,
} from "../common/apis/v1/mod.ts";

/** Hibernate or Wake: what hib's next pass drives its VM toward (see the module doc). */
export function direction(hib: CocoonHibernation): HibernationDesire {
  const phase = hib.status?.phase;
  const hibernate = hib.spec.desire === HIBERNATION_DESIRE_HIBERNATE
    ? phase !== COCOON_HIBERNATION_PHASE_WAKING
    : phase === COCOON_HIBERNATION_PHASE_HIBERNATING;
  return hibernate ? HIBERNATION_DESIRE_HIBERNATE : HIBERNATION_DESIRE_WAKE;
}
