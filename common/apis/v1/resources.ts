/** ResourceType descriptors for the two custom resources, for use with the kube/ client. */
import { resourceType } from "../../../kube/resource.ts";
import type { CocoonHibernation } from "./cocoonhibernation_types.ts";
import type { CocoonSet } from "./cocoonset_types.ts";
import { CocoonHibernationNames, CocoonSetNames, Group, Version } from "./groupversion.ts";

/** cocoonsets.cocoonset.cocoonstack.io: namespaced, with a status subresource. */
export const CocoonSets = resourceType<CocoonSet>({
  group: Group,
  version: Version,
  kind: CocoonSetNames.kind,
  plural: CocoonSetNames.plural,
  namespaced: true,
  statusSubresource: true,
});

/** cocoonhibernations.cocoonset.cocoonstack.io: namespaced, with a status subresource. */
export const CocoonHibernations = resourceType<CocoonHibernation>({
  group: Group,
  version: Version,
  kind: CocoonHibernationNames.kind,
  plural: CocoonHibernationNames.plural,
  namespaced: true,
  statusSubresource: true,
});
