/** Naming facts of the cocoonset.cocoonstack.io/v1 API: group, version, kinds, resource names. */

/** The API group both custom resources are served under. */
export const GROUP = "cocoonset.cocoonstack.io";
/** The only served (and stored) version. */
export const VERSION = "v1";
/** "group/version", the apiVersion field of every object of this API. */
export const API_VERSION = `${GROUP}/${VERSION}`;
/** Group and version together, as controller-runtime's schema.GroupVersion. */
export const GROUP_VERSION = Object.freeze({ group: GROUP, version: VERSION });

/** Names of the CocoonSet resource. */
export const COCOON_SET_NAMES = Object.freeze({
  kind: "CocoonSet",
  listKind: "CocoonSetList",
  plural: "cocoonsets",
  singular: "cocoonset",
  shortNames: Object.freeze(["cs", "cocoonsets"]),
  categories: Object.freeze(["cocoon"]),
});

/** Names of the CocoonHibernation resource. */
export const COCOON_HIBERNATION_NAMES = Object.freeze({
  kind: "CocoonHibernation",
  listKind: "CocoonHibernationList",
  plural: "cocoonhibernations",
  singular: "cocoonhibernation",
  shortNames: Object.freeze(["ch", "cocoonhibernations"]),
  categories: Object.freeze(["cocoon"]),
});

/** Kind of CocoonSet objects. */
export const KIND_COCOON_SET = COCOON_SET_NAMES.kind;
/** Kind of CocoonHibernation objects. */
export const KIND_COCOON_HIBERNATION = COCOON_HIBERNATION_NAMES.kind;
