import type { Status } from "./object.ts";

/** The metav1.StatusReason values the runtime classifies. */
export type StatusReason =
  | "NotFound"
  | "AlreadyExists"
  | "Conflict"
  | "Gone"
  | "Expired"
  | "Forbidden"
  | "Unauthorized"
  | "Invalid"
  | "BadRequest"
  | "MethodNotAllowed"
  | "TooManyRequests"
  | "Timeout"
  | "ServerTimeout"
  | "InternalError"
  | "ServiceUnavailable"
  | "Unknown";

const REASON_BY_CODE: Record<number, StatusReason> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  409: "Conflict",
  410: "Gone",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/** What an error is about, for messages: "pods ns/name". */
export interface ErrorTarget {
  /** Resource id: "pods", "cocoonsets.cocoonset.cocoonstack.io". */
  resource: string;
  /** Namespace of the object, absent for cluster scope or collections. */
  namespace?: string;
  /** Object name, absent for collections. */
  name?: string;
}

/**
 * An error answered by the API server (or the fake), classified by reason. The message names
 * the resource and object so a log line is useful without the surrounding context.
 */
export class ApiError extends Error {
  /** HTTP status code. */
  readonly code: number;
  /** The classified metav1.StatusReason; the is*() helpers test it. */
  readonly reason: StatusReason;
  /** The Status body the server sent, when it sent one. */
  readonly status?: Status;
  /** The object the request was about. */
  readonly target?: ErrorTarget;

  /** Prefer newApiError or ApiError.fromStatus, which build the message and Status body. */
  constructor(code: number, reason: StatusReason, message: string, opts?: {
    status?: Status;
    target?: ErrorTarget;
  }) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
    this.status = opts?.status;
    this.target = opts?.target;
  }

  /** Builds an error from an HTTP status code and an optional Status body. */
  static fromStatus(code: number, body: Status | undefined, target?: ErrorTarget): ApiError {
    const reason = classifyReason(code, body?.reason);
    const what = target ? describeTarget(target) : "";
    const detail = body?.message ?? `HTTP ${code}`;
    const message = what ? `${what}: ${reason}: ${detail}` : `${reason}: ${detail}`;
    return new ApiError(code, reason, message, { status: body, target });
  }
}

function classifyReason(code: number, reason?: string): StatusReason {
  if (reason && (reason as StatusReason) && isKnownReason(reason)) return reason;
  return REASON_BY_CODE[code] ?? "Unknown";
}

const knownReasons = new Set<string>([
  "NotFound",
  "AlreadyExists",
  "Conflict",
  "Gone",
  "Expired",
  "Forbidden",
  "Unauthorized",
  "Invalid",
  "BadRequest",
  "MethodNotAllowed",
  "TooManyRequests",
  "Timeout",
  "ServerTimeout",
  "InternalError",
  "ServiceUnavailable",
]);

function isKnownReason(reason: string): reason is StatusReason {
  return knownReasons.has(reason);
}

/** "pods ns/name", "pods name", or "pods". */
export function describeTarget(t: ErrorTarget): string {
  const name = t.name ? (t.namespace ? `${t.namespace}/${t.name}` : t.name) : "";
  return name ? `${t.resource} ${name}` : t.resource;
}

/** Creates an ApiError with a Status body shaped like the API server's. */
export function newApiError(
  code: number,
  reason: StatusReason,
  target: ErrorTarget,
  detail: string,
): ApiError {
  const status: Status = {
    apiVersion: "v1",
    kind: "Status",
    status: "Failure",
    message: detail,
    reason,
    code,
    details: { name: target.name, kind: target.resource },
  };
  return ApiError.fromStatus(code, status, target);
}

/** The first ApiError in err's cause chain (Go's errors.As), if any. */
export function apiErrorOf(err: unknown): ApiError | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    if (e instanceof ApiError) return e;
    seen.add(e);
  }
  return undefined;
}

function hasReason(err: unknown, ...reasons: StatusReason[]): boolean {
  const api = apiErrorOf(err);
  return api !== undefined && reasons.includes(api.reason);
}

/** True for 404 NotFound. */
export const isNotFound = (err: unknown): boolean => hasReason(err, "NotFound");
/** True for 409 AlreadyExists. */
export const isAlreadyExists = (err: unknown): boolean => hasReason(err, "AlreadyExists");
/** True for 409 Conflict (stale resourceVersion or failed precondition). */
export const isConflict = (err: unknown): boolean => hasReason(err, "Conflict");
/** True for 410 Gone / Expired (resourceVersion too old). */
export const isGone = (err: unknown): boolean => hasReason(err, "Gone", "Expired");
/** True for 403 Forbidden. */
export const isForbidden = (err: unknown): boolean => hasReason(err, "Forbidden");
/** True for 422 Invalid. */
export const isInvalid = (err: unknown): boolean => hasReason(err, "Invalid");

/** The message of an error, or a readable rendering of a non-Error thrown value. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  try {
    return typeof err === "string" ? err : JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * A caught error as a log line shows it: an Error with its class name first ("TypeError: …",
 * as String(err) renders it, so the kind of failure stays visible), anything else as
 * {@link errorMessage} renders it. For the text of a message (an Event, a condition, a wrapped
 * error) use errorMessage.
 */
export function errorText(err: unknown): string {
  return err instanceof Error ? String(err) : errorMessage(err);
}

/**
 * An Error saying what was being done, with err's message appended and err kept as the cause
 * (Go's fmt.Errorf("context: %w", err)). Classification helpers look through the cause chain.
 */
export function wrapError(context: string, err: unknown): Error {
  return new Error(`${context}: ${errorMessage(err)}`, { cause: err });
}
