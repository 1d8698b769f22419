/** Merge-patch bodies the reconcilers send by hand. */

/**
 * A JSON merge patch that sets annotations; a null value deletes that key on the server.
 * The map is sent as given, so callers decide which keys to touch.
 */
export function annotationsMergePatch(
  annotations: Record<string, string | null>,
): Record<string, unknown> {
  return { metadata: { annotations: { ...annotations } } };
}

/**
 * Like annotationsMergePatch, but an empty string means "delete this key" — the convention
 * the reconcilers use for optional annotations.
 */
export function annotationsMergePatchDroppingEmpty(
  annotations: Record<string, string>,
): Record<string, unknown> {
  const body: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(annotations)) body[k] = v === "" ? null : v;
  return annotationsMergePatch(body);
}
