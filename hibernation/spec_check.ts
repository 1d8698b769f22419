/**
 * Step 3 of a pass (docs/hibernation.md, "One pass"): static checks of a CocoonHibernation's
 * spec. A spec that can never name a pod, or asks for
 * something other than Hibernate or Wake, fails the request at once: waiting for such a pod would
 * read as "not yet present" forever.
 *
 * @module
 */
import { type CocoonHibernation, isValidHibernationDesire } from "../common/apis/v1/mod.ts";
import type { RequestProblem } from "./problem.ts";

/** Longest name the API server accepts for a pod (a DNS-1123 subdomain). */
const MAX_POD_NAME_LENGTH = 253;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Longest part of a podRef a message quotes: the Ready message is capped (32768 characters). */
const MAX_QUOTED = 80;

/** name quoted, cut to its start when long (the CRD does not bound podRef.name). */
function quoteStart(name: string): string {
  return name.length > MAX_QUOTED
    ? `${JSON.stringify(name.slice(0, MAX_QUOTED))}… (${name.length} characters)`
    : JSON.stringify(name);
}

/**
 * Why name cannot be a pod's name, or undefined when it can. Pod names are DNS-1123 subdomains:
 * lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most
 * 253 characters.
 */
export function podNameProblem(name: string): string | undefined {
  if (name.length > MAX_POD_NAME_LENGTH) {
    return `must be no more than ${MAX_POD_NAME_LENGTH} characters`;
  }
  if (!DNS1123_SUBDOMAIN.test(name)) {
    return "a pod name must consist of lower case alphanumeric characters, '-' or '.', and " +
      "must start and end with an alphanumeric character";
  }
  return undefined;
}

/**
 * The message the request fails with when its spec cannot be acted on, or undefined when it
 * can: a missing pod reference, a pod reference that is not a valid pod name, an unknown desire.
 */
export function specProblem(hib: CocoonHibernation): string | undefined {
  const podName = hib.spec?.podRef?.name ?? "";
  if (podName === "") return "spec.podRef.name is required";
  const bad = podNameProblem(podName);
  if (bad) return `spec.podRef.name ${quoteStart(podName)} is not a valid pod name: ${bad}`;
  const desire: unknown = hib.spec?.desire;
  if (!isValidHibernationDesire(desire)) return `unknown desire ${JSON.stringify(desire ?? "")}`;
  return undefined;
}

/** specProblem as the problem the pass records (invalid-spec: Failed, no requeue). */
export function specCheck(hib: CocoonHibernation): RequestProblem | undefined {
  const message = specProblem(hib);
  return message === undefined ? undefined : { problem: "invalid-spec", message };
}
