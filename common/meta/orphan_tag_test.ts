/** The orphan mark of a `:hibernate` tag (orphan_tag.ts): when the tag may go. */
import assert from "node:assert/strict";
import type { Pod } from "../../kube/core.ts";
import {
  ANNOTATION_HIBERNATE_ASKED_VMID,
  ANNOTATION_ORPHAN_HIBERNATE_TAG,
  ANNOTATION_VMID,
  applyHibernateState,
  clearOrphanTagMark,
  markOrphanTag,
  orphanTagDropDue,
  readOrphanTagMark,
} from "./mod.ts";

function pod(annotations: Record<string, string>, running: boolean): Pod {
  return {
    metadata: { name: "demo-0", namespace: "ns", annotations },
    spec: { containers: [{ name: "agent", image: "x" }], nodeName: "node-a" },
    status: running
      ? {
        containerStatuses: [{
          name: "agent",
          ready: true,
          restartCount: 0,
          image: "x",
          imageID: "x",
          state: { running: {} },
        }],
      }
      : {},
  } as Pod;
}

Deno.test("orphan mark: records the VM id the pod shows, empty when it shows none", () => {
  const up = pod({ [ANNOTATION_VMID]: "vm-1" }, true);
  markOrphanTag(up);
  assert.equal(readOrphanTagMark(up), "vm-1");
  const down = pod({}, false);
  assert.equal(readOrphanTagMark(down), undefined);
  markOrphanTag(down);
  assert.equal(readOrphanTagMark(down), "");
  clearOrphanTagMark(down);
  assert.equal(readOrphanTagMark(down), undefined);
});

Deno.test("orphan mark: due only for a live VM under another id, not asked and not leaving", () => {
  const mark = (vmID: string) => ({ [ANNOTATION_ORPHAN_HIBERNATE_TAG]: vmID });
  const cases: [string, Pod, boolean][] = [
    ["no mark", pod({ [ANNOTATION_VMID]: "vm-2" }, true), false],
    ["down", pod(mark(""), false), false],
    ["id but no running container", pod({ ...mark(""), [ANNOTATION_VMID]: "vm-2" }, false), false],
    [
      "live under the recorded id",
      pod({ ...mark("vm-1"), [ANNOTATION_VMID]: "vm-1" }, true),
      false,
    ],
    ["live under a new id", pod({ ...mark("vm-1"), [ANNOTATION_VMID]: "vm-2" }, true), true],
    ["live, was down when marked", pod({ ...mark(""), [ANNOTATION_VMID]: "vm-2" }, true), true],
    [
      "asked to hibernate again",
      (() => {
        const p = pod({ ...mark(""), [ANNOTATION_VMID]: "vm-2" }, true);
        applyHibernateState(true, p);
        return p;
      })(),
      false,
    ],
    [
      "the VM this operator last asked to hibernate (may be leaving)",
      pod(
        { ...mark(""), [ANNOTATION_VMID]: "vm-2", [ANNOTATION_HIBERNATE_ASKED_VMID]: "vm-2" },
        true,
      ),
      false,
    ],
    [
      "hibernating (lifecycle)",
      pod({
        ...mark(""),
        [ANNOTATION_VMID]: "vm-2",
        "vm.cocoonstack.io/lifecycle-state": "hibernating",
      }, true),
      false,
    ],
  ];
  for (const [name, p, want] of cases) assert.equal(orphanTagDropDue(p), want, name);
});
