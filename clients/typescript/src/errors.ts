import type { components } from "./generated/schema.js";

/** The body of every error answer of the API: `{detail, code, errors}` (some add members). */
export type ErrorBody = components["schemas"]["Error"] & Record<string, unknown>;

/**
 * An error answer of the Engram API. `status`: the HTTP status; `code`: the API's machine-readable
 * code (`invalid`, `not_found`, `conflict`, ...); `detail`: its sentence; `errors`: messages per
 * field path (`events[1].occurred_at`); `body`: the whole body (extra members such as
 * `current_version` of a stale blackboard write).
 */
export class EngramError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly errors: Record<string, string[]>;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(`${status} ${body.code}: ${body.detail}`);
    this.name = new.target.name;
    this.status = status;
    this.body = body;
    this.code = body.code;
    this.detail = body.detail;
    this.errors = body.errors ?? {};
  }
}

/** 400: bad input; `errors` names each field. */
export class InvalidInput extends EngramError {}
/** 401: no key, or a malformed, unknown or revoked one. */
export class AuthenticationFailed extends EngramError {}
/** 403: the key lacks the scope, or the caller may not act on this object. */
export class PermissionDenied extends EngramError {}
/** 404. */
export class NotFound extends EngramError {}
/** 409: a stale version, an idempotency key used with another body, a closed execution. */
export class Conflict extends EngramError {}
/** 413. */
export class PayloadTooLarge extends EngramError {}
/** 503: a dependency of the server is down (retried when the request carries an idempotency key). */
export class ServiceUnavailable extends EngramError {}
/** Any other 5xx. */
export class ServerError extends EngramError {}

/** The server could not be reached, or did not answer within the timeout (`timedOut`). */
export class TransportError extends Error {
  readonly timedOut: boolean;
  constructor(message: string, options: { cause?: unknown; timedOut?: boolean } = {}) {
    super(message, { cause: options.cause });
    this.name = "TransportError";
    this.timedOut = options.timedOut ?? false;
  }
}

const BY_STATUS: Record<number, new (status: number, body: ErrorBody) => EngramError> = {
  400: InvalidInput,
  401: AuthenticationFailed,
  403: PermissionDenied,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  503: ServiceUnavailable,
};

/** The error for an error answer; a body that is not the API's becomes `detail`. */
export function errorFor(status: number, body: unknown): EngramError {
  const parsed: ErrorBody =
    body !== null && typeof body === "object" && "code" in body && "detail" in body
      ? (body as ErrorBody)
      : { detail: String(body ?? "").slice(0, 500), code: "error", errors: {} };
  const cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : EngramError);
  return new cls(status, parsed);
}
