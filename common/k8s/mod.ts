/**
 * Kubernetes helpers shared by the reconcilers: merge-patch helpers over the kube/ client,
 * status conditions, resource quantities, wire-form equality and a deterministic YAML emitter.
 *
 * @module
 */
export * from "./pod_patch.ts";
export * from "./condition.ts";
export * from "./quantity.ts";
export * from "./same_json.ts";
export * from "./yaml.ts";
