/** CocoonHibernation: a request to hibernate or wake the VM behind one pod. */
import type { KubeObject, ObjectList } from "../../../kube/object.ts";
import type { Condition } from "../../k8s/condition.ts";
import type { CocoonHibernationPhase, HibernationDesire } from "./enums.ts";

/** The pod whose VM is targeted (same namespace). Immutable once created. */
export interface HibernationPodRef {
  name: string;
}

/** Desired state of a CocoonHibernation. */
export interface CocoonHibernationSpec {
  podRef: HibernationPodRef;
  desire: HibernationDesire;
}

/** Observed state of a CocoonHibernation. */
export interface CocoonHibernationStatus {
  observedGeneration?: number;
  phase?: CocoonHibernationPhase;
  vmName?: string;
  conditions?: Condition[];
}

/** A CocoonHibernation object as the API server serves it. */
export interface CocoonHibernation extends KubeObject {
  spec: CocoonHibernationSpec;
  status?: CocoonHibernationStatus;
}

/** A list of CocoonHibernations. */
export type CocoonHibernationList = ObjectList<CocoonHibernation>;
