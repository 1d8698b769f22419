/** The DER writer, now in kube/der.ts (the metrics server issues its certificate with it). */
export * from "../../kube/der.ts";
