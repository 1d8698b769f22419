/**
 * The pod-level contract between the operator and vk-cocoon: label and annotation keys, typed
 * annotation readers/writers (VMSpec, VMRuntime, lifecycle, hibernate), VM naming and pod checks.
 *
 * @module
 */
export * from "./connection.ts";
export * from "./hibernate.ts";
export * from "./keys.ts";
export * from "./lifecycle.ts";
export * from "./orphan_tag.ts";
export * from "./owner.ts";
export * from "./pod.ts";
export * from "./vm_liveness.ts";
export * from "./vmname.ts";
export * from "./vmruntime.ts";
export * from "./vmspec.ts";
