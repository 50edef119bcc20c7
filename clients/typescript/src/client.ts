import createClient, { type Client } from "openapi-fetch";
import type { operations, paths } from "./generated/schema.js";
import { OPERATIONS, type OperationId } from "./generated/operations.js";
import { errorFor, TransportError } from "./errors.js";
import { parseEventStream, type ServerSentEvent } from "./sse.js";

type Op<K extends OperationId> = operations[K];
type Defined<T> = Exclude<T, undefined>;
type JsonOf<R> = R extends { content: { "application/json": infer B } } ? B : undefined;

/** The path parameters of operation `K` (`never` when it has none). */
export type PathOf<K extends OperationId> = Defined<Op<K>["parameters"]["path"]>;
/** The query parameters of operation `K` (`never` when it has none). */
export type QueryOf<K extends OperationId> = Defined<Op<K>["parameters"]["query"]>;
/** The JSON request body of operation `K` (`never` when it takes none). */
export type BodyOf<K extends OperationId> = [Defined<Op<K>["requestBody"]>] extends [never]
  ? never
  : Defined<Op<K>["requestBody"]> extends { content: { "application/json": infer B } }
    ? B
    : never;
/** The JSON answer of operation `K` on success (a union over its 2xx statuses). */
export type ResultOf<K extends OperationId> = {
  [S in keyof Op<K>["responses"]]: S extends 200 | 201 | 202 | 204 ? JsonOf<Op<K>["responses"][S]> : never;
}[keyof Op<K>["responses"]];

/** The operations that answer a cursor page (`{results, next, previous}`). */
export type ListOperationId = {
  [K in OperationId]: ResultOf<K> extends { results: unknown[]; next?: string | null } ? K : never;
}[OperationId];
/** One item of the pages of list operation `K`. */
export type ItemOf<K extends ListOperationId> = ResultOf<K> extends { results: (infer T)[] } ? T : never;

/** What a call of operation `K` sends: `path` when it has path parameters, `query`, `body`. */
export type CallArgs<K extends OperationId> = ([PathOf<K>] extends [never] ? { path?: undefined } : { path: PathOf<K> }) &
  ([QueryOf<K>] extends [never] ? { query?: undefined } : { query?: QueryOf<K> }) &
  ([BodyOf<K>] extends [never] ? { body?: undefined } : { body: BodyOf<K> });

/** Per-call options. */
export interface CallOptions {
  /** Cancels the call (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
  /** Milliseconds per attempt before a `TransportError` with `timedOut` (default: the client's). */
  timeoutMs?: number;
  /**
   * The `Idempotency-Key` header. POSTs get a fresh one per call (the same on each retry) unless
   * given; `null` sends none. Only a request that carries a key is retried.
   */
  idempotencyKey?: string | null;
  /** Retry without a header: the body names itself (a checkpoint's `idempotency_key`). */
  retryUnkeyed?: boolean;
}

/** `attempts` tries in all; the n-th retry waits `backoffMs * 2**(n-1)` ms. */
export interface RetryPolicy {
  attempts: number;
  backoffMs: number;
}

/** How to reach the server. */
export interface EngramClientOptions {
  /** The server's origin, e.g. `http://localhost:8000` (the client adds `/api/v1/...`). */
  baseUrl: string;
  /** The agent's API key (sent as `Authorization: Bearer`). */
  apiKey: string;
  /** Milliseconds per attempt (default 30 000). */
  timeoutMs?: number;
  /** Default `{attempts: 3, backoffMs: 200}`. */
  retry?: RetryPolicy;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

const RETRY_STATUSES = new Set([502, 503, 504]);

function randomKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (ch) => {
    const r = (Math.random() * 16) | 0;
    return (ch === "x" ? r : (r & 0x3) | 0x8).toString(16);
  });
}

/** A signal aborted by `outer` or after `timeoutMs`; `timedOut()` says which. (AbortSignal.any is Node 20+.) */
function attemptSignal(outer: AbortSignal | undefined, timeoutMs: number) {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException("The request timed out.", "TimeoutError"));
  }, timeoutMs);
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    clearTimer: () => clearTimeout(timer),
    detach: () => outer?.removeEventListener("abort", onAbort),
  };
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/**
 * The transport: every operation of the schema by its operationId (`call`), over openapi-fetch.
 * Errors are `EngramError` subclasses (from the API's `{detail, code, errors}` body) and
 * `TransportError`; a cancelled call rejects with its signal's reason.
 */
export class EngramTransport {
  /** The openapi-fetch client underneath (typed by the generated `paths`). */
  readonly raw: Client<paths>;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;

  constructor(options: EngramClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = options.retry ?? { attempts: 3, backoffMs: 200 };
    const baseFetch = options.fetch ?? globalThis.fetch;
    this.raw = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: { Authorization: `Bearer ${options.apiKey}` },
      fetch: (request: Request) => baseFetch(request),
    });
  }

  /** Call operation `operationId`; resolves to its JSON answer, rejects with an `EngramError`. */
  async call<K extends OperationId>(operationId: K, args: CallArgs<K>, options: CallOptions = {}): Promise<ResultOf<K>> {
    const response = await this.send(operationId, args, options, "json");
    return response.data as ResultOf<K>;
  }

  /**
   * Every item of list operation `operationId`, page after page: each page's `next` link gives the
   * cursor of the following one, until the last page (or `options.signal` aborts). `query.limit`
   * is the page size, not a total: stop iterating to take fewer.
   */
  async *items<K extends ListOperationId>(
    operationId: K,
    args: CallArgs<K>,
    options: CallOptions = {},
  ): AsyncGenerator<ItemOf<K>> {
    let query = args.query as Record<string, unknown> | undefined;
    for (;;) {
      const page = (await this.call(operationId, { ...args, query } as CallArgs<K>, options)) as {
        results: ItemOf<K>[];
        next?: string | null;
      };
      yield* page.results;
      const cursor = page.next ? new URL(page.next).searchParams.get("cursor") : null;
      if (!cursor) return;
      query = { ...query, cursor };
    }
  }

  /** The `text/event-stream` of operation `operationId` as events, until the signal aborts it. */
  async *stream<K extends OperationId>(
    operationId: K,
    args: CallArgs<K>,
    options: Omit<CallOptions, "timeoutMs"> = {},
  ): AsyncGenerator<ServerSentEvent> {
    // the timeout bounds the wait for the answer's headers only; the stream lasts until aborted
    const response = await this.send(operationId, args, { ...options, idempotencyKey: null }, "stream");
    yield* parseEventStream(response.data as ReadableStream<Uint8Array>);
  }

  private async send(
    operationId: OperationId,
    args: { path?: unknown; query?: unknown; body?: unknown },
    options: CallOptions,
    parseAs: "json" | "stream",
  ): Promise<{ data: unknown }> {
    const { method, path } = OPERATIONS[operationId];
    const key = options.idempotencyKey === undefined ? (method === "POST" ? randomKey() : null) : options.idempotencyKey;
    const headers: Record<string, string> = key ? { "Idempotency-Key": key } : {};
    const attempts = key || options.retryUnkeyed ? this.retry.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      const guard = attemptSignal(options.signal, options.timeoutMs ?? this.timeoutMs);
      let outcome: { data?: unknown; error?: unknown; response: Response };
      try {
        // openapi-fetch's request() is typed per path; the operation table guarantees the pairing
        outcome = await (this.raw.request as (m: string, p: string, init: object) => Promise<typeof outcome>)(
          method.toLowerCase(),
          path,
          {
            params: { path: args.path, query: args.query },
            body: args.body,
            headers,
            signal: guard.signal,
            parseAs,
          },
        );
      } catch (cause) {
        if (options.signal?.aborted) throw options.signal.reason;
        const timedOut = guard.timedOut();
        if (attempt >= attempts) {
          throw new TransportError(timedOut ? `${operationId} timed out` : `${operationId} could not reach the server`, {
            cause,
            timedOut,
          });
        }
        await sleep(this.retry.backoffMs * 2 ** (attempt - 1), options.signal);
        continue;
      } finally {
        guard.clearTimer();
        // a stream keeps following the caller's signal until it ends
        if (parseAs === "json") guard.detach();
      }
      const { response } = outcome;
      if (response.ok) return { data: outcome.data };
      if (parseAs === "stream") guard.detach();
      if (RETRY_STATUSES.has(response.status) && attempt < attempts) {
        await sleep(this.retry.backoffMs * 2 ** (attempt - 1), options.signal);
        continue;
      }
      throw errorFor(response.status, outcome.error);
    }
  }
}
