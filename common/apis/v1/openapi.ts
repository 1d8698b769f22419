/**
 * A small builder for the OpenAPI v3 subset CRD structural schemas use. It keeps schema.ts
 * readable: each helper returns a plain JSONSchemaProps object, so the result serialises as-is.
 */

/** apiextensions.k8s.io/v1 ValidationRule (a CEL rule). */
export interface ValidationRule {
  rule: string;
  message?: string;
}

/** The fields of apiextensions.k8s.io/v1 JSONSchemaProps the cocoon CRDs use. */
export interface JSONSchemaProps {
  description?: string;
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  format?: string;
  enum?: readonly unknown[];
  default?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  items?: JSONSchemaProps;
  additionalProperties?: JSONSchemaProps;
  anyOf?: JSONSchemaProps[];
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
  "x-kubernetes-validations"?: ValidationRule[];
}

type Extra = Omit<JSONSchemaProps, "type" | "properties" | "items" | "description">;

/** A string field. */
export function str(description: string | undefined, extra: Extra = {}): JSONSchemaProps {
  return { ...withDescription(description), type: "string", ...extra };
}

/** A string field restricted to values (an enum). */
export function strEnum(
  description: string | undefined,
  values: readonly string[],
  extra: Extra = {},
): JSONSchemaProps {
  return { ...withDescription(description), type: "string", enum: [...values], ...extra };
}

/** A 32-bit integer field. */
export function int32(description: string | undefined, extra: Extra = {}): JSONSchemaProps {
  return { ...withDescription(description), type: "integer", format: "int32", ...extra };
}

/** A 64-bit integer field. */
export function int64(description: string | undefined, extra: Extra = {}): JSONSchemaProps {
  return { ...withDescription(description), type: "integer", format: "int64", ...extra };
}

/** A boolean field. */
export function bool(description: string | undefined): JSONSchemaProps {
  return { ...withDescription(description), type: "boolean" };
}

/** An object with the given properties; required lists the mandatory ones. */
export function obj(
  description: string | undefined,
  properties: Record<string, JSONSchemaProps>,
  extra: Omit<Extra, "enum"> = {},
): JSONSchemaProps {
  return { ...withDescription(description), type: "object", properties, ...extra };
}

/** An array of items. */
export function arr(
  description: string | undefined,
  items: JSONSchemaProps,
  extra: Extra = {},
): JSONSchemaProps {
  return { ...withDescription(description), type: "array", items, ...extra };
}

/** A map from string keys to values of one schema. */
export function mapOf(description: string | undefined, values: JSONSchemaProps): JSONSchemaProps {
  return { ...withDescription(description), type: "object", additionalProperties: values };
}

/** The shape apimachinery gives resource.Quantity: int-or-string with the quantity grammar. */
export function quantity(description: string | undefined): JSONSchemaProps {
  return {
    ...withDescription(description),
    anyOf: [{ type: "integer" }, { type: "string" }],
    pattern: QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": true,
  };
}

/** The server-side pattern for quantity strings (as kube-openapi publishes it). */
export const QUANTITY_PATTERN =
  "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$";

function withDescription(description: string | undefined): { description?: string } {
  return description === undefined ? {} : { description };
}
