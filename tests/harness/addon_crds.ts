/**
 * Stand-ins for the CRDs of the add-ons the optional manifests target, so a server-side dry run
 * on the test control plane can check those objects: the Prometheus Operator's ServiceMonitor
 * and PrometheusRule (monitoring.coreos.com/v1) and cert-manager's Issuer and Certificate
 * (cert-manager.io/v1). Neither project's CRDs are on this machine, so these are written here
 * from their API references, reduced to the fields this repository's manifests use, typed and
 * constrained (enums, int-or-string) as the real ones are. Nothing preserves unknown fields, so
 * kubectl's strict field validation refuses a field the real CRD does not have among those, or
 * a misspelling; a field the real CRD has and these lack is refused too (add it here).
 *
 * @module
 */

type Schema = Record<string, unknown>;

const str: Schema = { type: "string" };
const strMap: Schema = { type: "object", additionalProperties: str };
const obj = (properties: Record<string, Schema>, required?: string[]): Schema => ({
  type: "object",
  properties,
  ...(required ? { required } : {}),
});
const arr = (items: Schema): Schema => ({ type: "array", items });
const secretKey = obj({ name: str, key: str, optional: { type: "boolean" } }, ["key"]);

function crd(
  group: string,
  kind: string,
  plural: string,
  spec: Schema,
): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: obj({ apiVersion: str, kind: str, metadata: { type: "object" }, spec }),
        },
      }],
    },
  };
}

/** The Prometheus Operator's Duration: `30s`, `1h30m`, `0`. */
const duration: Schema = {
  type: "string",
  pattern:
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
};

const labelSelector = obj({
  matchLabels: strMap,
  matchExpressions: arr(obj({ key: str, operator: str, values: arr(str) })),
});

/** ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1). */
export function prometheusOperatorCrds(): Record<string, unknown>[] {
  const endpoint = obj({
    port: str,
    targetPort: { "x-kubernetes-int-or-string": true },
    path: str,
    scheme: { type: "string", enum: ["http", "https", "HTTP", "HTTPS"] },
    interval: duration,
    bearerTokenFile: str,
    honorLabels: { type: "boolean" },
    tlsConfig: obj({
      serverName: str,
      insecureSkipVerify: { type: "boolean" },
      ca: obj({ secret: secretKey, configMap: secretKey }),
    }),
  });
  const rule = obj({
    alert: str,
    record: str,
    expr: { "x-kubernetes-int-or-string": true },
    for: duration,
    labels: strMap,
    annotations: strMap,
  }, ["expr"]);
  return [
    crd(
      "monitoring.coreos.com",
      "ServiceMonitor",
      "servicemonitors",
      obj({ selector: labelSelector, endpoints: arr(endpoint), jobLabel: str }, ["selector"]),
    ),
    crd(
      "monitoring.coreos.com",
      "PrometheusRule",
      "prometheusrules",
      obj({ groups: arr(obj({ name: str, interval: str, rules: arr(rule) }, ["name"])) }),
    ),
  ];
}

/** Issuer and Certificate (cert-manager.io/v1). */
export function certManagerCrds(): Record<string, unknown>[] {
  const usages = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
  ];
  return [
    crd(
      "cert-manager.io",
      "Issuer",
      "issuers",
      obj({
        selfSigned: obj({ crlDistributionPoints: arr(str) }),
        ca: obj({ secretName: str }, ["secretName"]),
      }),
    ),
    crd(
      "cert-manager.io",
      "Certificate",
      "certificates",
      obj({
        secretName: str,
        commonName: str,
        dnsNames: arr(str),
        duration: str,
        renewBefore: str,
        isCA: { type: "boolean" },
        usages: arr({ type: "string", enum: usages }),
        privateKey: obj({
          algorithm: { type: "string", enum: ["RSA", "ECDSA", "Ed25519"] },
          size: { type: "integer" },
          encoding: { type: "string", enum: ["PKCS1", "PKCS8"] },
          rotationPolicy: { type: "string", enum: ["Never", "Always"] },
        }),
        issuerRef: obj({ name: str, kind: str, group: str }, ["name"]),
      }, ["issuerRef", "secretName"]),
    ),
  ];
}

/** Installs both add-ons' stand-in CRDs on a control plane and waits until they serve. */
export async function installAddonCrds(
  cp: { installCrds(dir: string): Promise<void> },
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "addon-crds-" });
  try {
    for (const [i, crd] of [...prometheusOperatorCrds(), ...certManagerCrds()].entries()) {
      await Deno.writeTextFile(`${dir}/${i}.json`, JSON.stringify(crd));
    }
    await cp.installCrds(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
