/** Naming facts of the cocoonset.cocoonstack.io/v1 API: group, version, kinds, resource names. */

/** The API group both custom resources are served under. */
export const Group = "cocoonset.cocoonstack.io";
/** The only served (and stored) version. */
export const Version = "v1";
/** "group/version", the apiVersion field of every object of this API. */
export const APIVersion = `${Group}/${Version}`;
/** Group and version together, as controller-runtime's schema.GroupVersion. */
export const GroupVersion = Object.freeze({ group: Group, version: Version });

/** Names of the CocoonSet resource. */
export const CocoonSetNames = Object.freeze({
  kind: "CocoonSet",
  listKind: "CocoonSetList",
  plural: "cocoonsets",
  singular: "cocoonset",
  shortNames: Object.freeze(["cs", "cocoonsets"]),
  categories: Object.freeze(["cocoon"]),
});

/** Names of the CocoonHibernation resource. */
export const CocoonHibernationNames = Object.freeze({
  kind: "CocoonHibernation",
  listKind: "CocoonHibernationList",
  plural: "cocoonhibernations",
  singular: "cocoonhibernation",
  shortNames: Object.freeze(["ch", "cocoonhibernations"]),
  categories: Object.freeze(["cocoon"]),
});

/** Kind of CocoonSet objects. */
export const KindCocoonSet = CocoonSetNames.kind;
/** Kind of CocoonHibernation objects. */
export const KindCocoonHibernation = CocoonHibernationNames.kind;
