/**
 * Which hosts are Google's registries and which token endpoint a credentials file names, apart
 * from the credential sources (google.ts): the permission check and `deno task start`'s launcher
 * need these without loading the logger and the token machinery.
 *
 * @module
 */
import { isRecord } from "../errors.ts";

/** Default token endpoint for key files without token_uri. */
export const GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token";

/** Whether host is served by Google's registries (port of go-containerregistry's isGoogle). */
export function isGoogleHost(host: string): boolean {
  return host === "gcr.io" || host.endsWith(".gcr.io") || host.endsWith(".pkg.dev") ||
    host.endsWith(".google.com");
}

/**
 * The token endpoint a credentials JSON text would be exchanged at (its token_uri, else
 * Google's), or undefined when the text is no service-account or authorized-user file. The
 * permission check uses it to name that host before any exchange is tried.
 */
export function credentialsTokenEndpoint(text: string): string | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isRecord(doc) || (doc.type !== "service_account" && doc.type !== "authorized_user")) {
    return undefined;
  }
  return typeof doc.token_uri === "string" && doc.token_uri !== ""
    ? doc.token_uri
    : GOOGLE_TOKEN_URL;
}
