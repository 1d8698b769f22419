/**
 * "No duplicate pod ever observed": every pod a CocoonSet owns claims one slot — set, role and
 * slot label — and at no moment the test observes may two live pods (present, not terminating)
 * claim the same slot. Fed with the pod observer's changes in order; a pod that becomes live
 * while another pod of its slot is live is a violation, recorded with both pods.
 *
 * Pod names follow the slot, so the API server alone keeps two pods of one name apart; the
 * ledger still checks by labels, which would catch a pod created under another name for a
 * taken slot, or a slot label moved onto a second pod.
 *
 * @module
 */
import { LABEL_COCOON_SET, LABEL_ROLE, LABEL_SLOT } from "../../common/meta/keys.ts";
import type { Pod } from "../../kube/core.ts";
import type { Observation } from "./_observer.ts";

/** Two live pods for one slot. */
export interface SlotViolation {
  slot: string;
  /** The pod already live. */
  live: string;
  /** The pod that became live next to it. */
  second: string;
  at: number;
}

/** What a slot's live pods were, by uid. */
interface Claim {
  name: string;
  uid: string;
  created: string;
}

function describe(c: Claim): string {
  return `${c.name} (uid ${c.uid}, created ${c.created})`;
}

/** The slot a pod claims (`ns/set/role/slot`), or undefined for pods of no CocoonSet. */
export function slotOf(pod: Pod): string | undefined {
  const labels = pod.metadata.labels ?? {};
  const set = labels[LABEL_COCOON_SET];
  if (!set) return undefined;
  return `${pod.metadata.namespace}/${set}/${labels[LABEL_ROLE] ?? ""}/${labels[LABEL_SLOT] ?? ""}`;
}

/** Tracks live pods per slot; see the module doc. */
export class SlotLedger {
  /** slot → uid → claim. */
  readonly #live = new Map<string, Map<string, Claim>>();
  /** uid → slot it was filed under (labels can change). */
  readonly #slotOfUid = new Map<string, string>();
  readonly violations: SlotViolation[] = [];
  /** Pods that ever became live. */
  podsSeen = 0;

  /** Applies one observed change. */
  observe(o: Observation<Pod>): void {
    const pod = o.object;
    const uid = pod.metadata.uid ?? "";
    const previous = this.#slotOfUid.get(uid);
    if (previous !== undefined) {
      this.#live.get(previous)?.delete(uid);
      this.#slotOfUid.delete(uid);
    }
    if (o.type === "DELETED" || pod.metadata.deletionTimestamp) return;
    const slot = slotOf(pod);
    if (slot === undefined) return;
    const claims = this.#live.get(slot) ?? new Map<string, Claim>();
    this.#live.set(slot, claims);
    const claim: Claim = {
      name: pod.metadata.name ?? "",
      uid,
      created: pod.metadata.creationTimestamp ?? "",
    };
    if (previous === undefined) this.podsSeen++;
    for (const other of claims.values()) {
      this.violations.push({ slot, live: describe(other), second: describe(claim), at: o.at });
    }
    claims.set(uid, claim);
    this.#slotOfUid.set(uid, slot);
  }

  /** Throws, listing every violation, when any was recorded. */
  assertNone(): void {
    if (this.violations.length === 0) return;
    const lines = this.violations.map((v) =>
      `  ${
        new Date(v.at).toISOString()
      } slot ${v.slot}: ${v.second} became live while ${v.live} was live`
    );
    throw new Error(`duplicate pods observed:\n${lines.join("\n")}`);
  }
}
