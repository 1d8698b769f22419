/**
 * The harness's waits: polling with a deadline comes from kube/testing (one helper for every
 * test); freePort is the harness's own.
 *
 * @module
 */
export { waitFor, type WaitOptions, waitUntil } from "../../kube/testing/wait.ts";

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}
