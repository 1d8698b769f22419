/**
 * RegistryError: a failed registry call, carrying what a log line needs to be useful on its own:
 * the operation, `repo:tag`, the HTTP status and the registry's error codes (distribution spec
 * `{"errors":[{"code","message"}]}`), e.g. "HEAD manifest proj/vm:hibernate: 401 Unauthorized:
 * UNAUTHORIZED: authentication required".
 */

/** One entry of a distribution-spec error body. */
export interface RegistryDiagnostic {
  /** Error code from the distribution spec ("MANIFEST_UNKNOWN", "UNAUTHORIZED", …). */
  code: string;
  /** The registry's message for it. */
  message?: string;
}

/** A registry answered with an unexpected status (or a token exchange failed). */
export class RegistryError extends Error {
  /** HTTP status of the failing response. */
  readonly status: number;
  /** First error code from the body (e.g. "UNAUTHORIZED"), or "" when the body had none. */
  readonly code: string;
  /** Every diagnostic of the body. */
  readonly diagnostics: RegistryDiagnostic[];

  /** action names the call ("HEAD manifest repo:tag"); the message is built from the rest. */
  constructor(
    action: string,
    status: number,
    statusText: string,
    diagnostics: RegistryDiagnostic[],
    rawBody = "",
  ) {
    super(`${action}: ${describe(status, statusText, diagnostics, rawBody)}`);
    this.name = "RegistryError";
    this.status = status;
    this.diagnostics = diagnostics;
    this.code = diagnostics[0]?.code ?? "";
  }

  /**
   * The same failure seen from a caller's request: a copy whose message starts with prefix
   * (e.g. the repo:tag a shared ping failed for). The original stays untouched, since concurrent
   * callers share it.
   */
  prefixed(prefix: string): RegistryError {
    const copy = new RegistryError(prefix, this.status, "", this.diagnostics);
    copy.message = `${prefix}: ${this.message}`;
    copy.cause = this;
    return copy;
  }

  /** Whether the registry refused the credentials (401) or the access (403). */
  get isAuth(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

const MAX_ERROR_BODY = 64 * 1024;

/** Reads a failed response into a RegistryError (consumes the body, at most 64 KiB). */
export async function errorFromResponse(action: string, res: Response): Promise<RegistryError> {
  const raw = await readCapped(res, MAX_ERROR_BODY);
  return new RegistryError(action, res.status, res.statusText, parseDiagnostics(raw), raw);
}

/** Parses `{"errors":[...]}`; anything else yields no diagnostics. */
export function parseDiagnostics(raw: string): RegistryDiagnostic[] {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return [];
  }
  if (!isRecord(body) || !Array.isArray(body.errors)) return [];
  const out: RegistryDiagnostic[] = [];
  for (const e of body.errors) {
    if (isRecord(e) && typeof e.code === "string") {
      out.push({ code: e.code, message: typeof e.message === "string" ? e.message : undefined });
    }
  }
  return out;
}

/** Reads at most limit bytes of the body as text and releases the rest. */
export async function readCapped(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(Math.min(size, limit));
  let off = 0;
  for (const c of chunks) {
    const n = Math.min(c.length, all.length - off);
    all.set(c.subarray(0, n), off);
    off += n;
    if (off >= all.length) break;
  }
  return new TextDecoder().decode(all);
}

function describe(
  status: number,
  statusText: string,
  diagnostics: RegistryDiagnostic[],
  rawBody: string,
): string {
  const head = `${status}${statusText ? ` ${statusText}` : ""}`;
  if (diagnostics.length > 0) {
    return `${head}: ${
      diagnostics.map((d) => (d.message ? `${d.code}: ${d.message}` : d.code)).join("; ")
    }`;
  }
  const text = rawBody.trim();
  return text ? `${head}: ${text.slice(0, 200)}` : head;
}

/** Narrows unknown JSON to an object record. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
