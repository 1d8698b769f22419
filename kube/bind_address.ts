/**
 * Go-style listen addresses (controller-runtime's BindAddress flags), apart from the servers that
 * use them: the configuration check and `deno task start`'s launcher parse them without loading
 * the metrics stack.
 *
 * @module
 */

/** A parsed listen address. `hostname` is undefined for "all interfaces" (":8080"). */
export interface BindAddress {
  hostname?: string;
  port: number;
}

/** Thrown by parseBindAddress. */
export class BindAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BindAddressError";
  }
}

/**
 * Parses a Go-style listen address: ":PORT", "HOST:PORT", "[IPv6]:PORT". "0" (and "") mean
 * "disabled" and return undefined, as controller-runtime's BindAddress does. Port names such as
 * ":http", which Go would resolve, are rejected: only numbers 0-65535.
 */
export function parseBindAddress(s: string): BindAddress | undefined {
  if (s === "0" || s === "") return undefined;
  const bad = (why: string) =>
    new BindAddressError(`invalid bind address ${JSON.stringify(s)}: ${why}`);
  const colon = s.lastIndexOf(":");
  if (colon < 0) throw bad('want ":PORT", "HOST:PORT" or "[IPv6]:PORT" ("0" disables)');
  let host = s.slice(0, colon);
  const portText = s.slice(colon + 1);
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw bad("port must be a number from 0 to 65535");
  }
  if (host.startsWith("[")) {
    if (!host.endsWith("]")) throw bad("missing ']' after IPv6 address");
    host = host.slice(1, -1);
    if (!isIPv6(host)) throw bad(`${JSON.stringify(host)} is not an IPv6 address`);
  } else if (host.includes(":")) {
    throw bad("an IPv6 address must be written in brackets, e.g. [::1]:8080");
  } else if (host !== "" && !isIPv4(host) && !isHostname(host)) {
    throw bad(`${JSON.stringify(host)} is not an IP address or host name`);
  }
  return { hostname: host === "" ? undefined : host, port: Number(portText) };
}

function isIPv4(s: string): boolean {
  const parts = s.split(".");
  return parts.length === 4 &&
    parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255);
}

function isIPv6(s: string): boolean {
  if (s.includes("%")) return false; // zones are not supported by Deno.serve
  try {
    // The URL parser validates IPv6 literals (and normalises them).
    return new URL(`http://[${s}]/`).hostname.length > 2;
  } catch {
    return false;
  }
}

function isHostname(s: string): boolean {
  return s.length <= 253 &&
    s.split(".").every((l) => /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(l)) &&
    !/^\d+(\.\d+)*$/.test(s); // all-numeric "hosts" are malformed IPs, not names
}
