/**
 * Throw-away X.509 certificates for the test control plane; the issuer lives in kube/x509.ts
 * since the metrics server issues its self-signed certificate with it.
 *
 * @module
 */
export * from "../../kube/x509.ts";
