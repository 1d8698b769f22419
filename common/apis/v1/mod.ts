/**
 * The cocoonset.cocoonstack.io/v1 API: CocoonSet and CocoonHibernation types, their enums and
 * defaults, naming facts, ResourceType descriptors, condition vocabulary and CRD schemas.
 *
 * @module
 */
export * from "./cocoonhibernation_types.ts";
export * from "./cocoonset_types.ts";
export * from "./conditions.ts";
export * from "./crd.ts";
export * from "./enums.ts";
export * from "./groupversion.ts";
export * from "./resources.ts";
