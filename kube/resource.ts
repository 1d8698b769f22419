import type { KubeObject } from "./object.ts";

/**
 * Describes one API resource: where it is served and how it behaves. The type parameter ties a
 * descriptor to the TypeScript shape of its objects so client calls are typed end to end.
 */
export interface ResourceType<T extends KubeObject = KubeObject> {
  /** API group; "" for the core group. */
  readonly group: string;
  /** API version within the group ("v1"). */
  readonly version: string;
  /** The Kind objects carry ("Pod", "CocoonSet"). */
  readonly kind: string;
  /** Lower-case plural used in URLs. */
  readonly plural: string;
  /** False for cluster-scoped resources (the namespace argument is then ""). */
  readonly namespaced: boolean;
  /** True when the resource has a status subresource (spec/status isolation, generation). */
  readonly statusSubresource: boolean;
  /** Phantom field carrying T; never set at runtime. */
  readonly __type?: T;
}

/** Declares a resource type. */
export function resourceType<T extends KubeObject>(
  spec: Omit<ResourceType<T>, "__type">,
): ResourceType<T> {
  return Object.freeze({ ...spec });
}

/** "group/version", or "version" for the core group. */
export function apiVersionOf(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** A stable identifier for a resource type ("pods", "cocoonsets.cocoonset.cocoonstack.io"). */
export function resourceId(rt: ResourceType): string {
  return rt.group ? `${rt.plural}.${rt.group}` : rt.plural;
}
