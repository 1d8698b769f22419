import assert from "node:assert/strict";
import {
  type CocoonHibernationPhase,
  CocoonHibernationPhaseActive,
  CocoonHibernationPhaseFailed,
  CocoonHibernationPhaseHibernated,
  CocoonHibernationPhaseHibernating,
  CocoonHibernationPhasePending,
  CocoonHibernationPhaseWaking,
} from "../common/apis/v1/mod.ts";
import { request } from "./_fixtures.ts";
import { direction } from "./direction.ts";

Deno.test("direction: the desire, except that a reversed desire finishes the transition in flight", () => {
  const phases: (CocoonHibernationPhase | undefined)[] = [
    undefined,
    CocoonHibernationPhasePending,
    CocoonHibernationPhaseHibernating,
    CocoonHibernationPhaseHibernated,
    CocoonHibernationPhaseWaking,
    CocoonHibernationPhaseActive,
    CocoonHibernationPhaseFailed,
  ];
  for (const phase of phases) {
    const status = phase ? { phase } : undefined;
    assert.equal(
      direction(request("h", "Hibernate", { status })),
      phase === CocoonHibernationPhaseWaking ? "Wake" : "Hibernate",
      `Hibernate in ${phase}`,
    );
    assert.equal(
      direction(request("h", "Wake", { status })),
      phase === CocoonHibernationPhaseHibernating ? "Hibernate" : "Wake",
      `Wake in ${phase}`,
    );
  }
});
