/** ResourceType descriptors for the two custom resources, for use with the kube/ client. */
import { resourceType } from "../../../kube/resource.ts";
import type { CocoonHibernation } from "./cocoonhibernation_types.ts";
import type { CocoonSet } from "./cocoonset_types.ts";
import { COCOON_HIBERNATION_NAMES, COCOON_SET_NAMES, GROUP, VERSION } from "./groupversion.ts";

/** cocoonsets.cocoonset.cocoonstack.io: namespaced, with a status subresource. */
export const CocoonSets = resourceType<CocoonSet>({
  group: GROUP,
  version: VERSION,
  kind: COCOON_SET_NAMES.kind,
  plural: COCOON_SET_NAMES.plural,
  namespaced: true,
  statusSubresource: true,
});

/** cocoonhibernations.cocoonset.cocoonstack.io: namespaced, with a status subresource. */
export const CocoonHibernations = resourceType<CocoonHibernation>({
  group: GROUP,
  version: VERSION,
  kind: COCOON_HIBERNATION_NAMES.kind,
  plural: COCOON_HIBERNATION_NAMES.plural,
  namespaced: true,
  statusSubresource: true,
});
