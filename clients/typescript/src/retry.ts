/**
 * Retries in one place, the fetch every call goes through: a 429 or 503 is sent again, up to
 * `retries` times, after the wait its Retry-After names. Only requests that are safe to repeat
 * are: reads, and writes that carry an Idempotency-Key (the server answers a repeated key with
 * the first answer, so nothing is written twice).
 */

export type Fetch = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /** How many times a 429 or 503 is retried (default 2; 0: never). */
  retries: number;
  /** A Retry-After longer than this is not waited out: the answer is thrown (default 30 s). */
  maxWaitMs: number;
  /** The wait when an answer names none: this, doubled at each retry (default 500 ms). */
  backoffMs: number;
}

const RETRIED = new Set([429, 503]);
const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

export function retrying(send: Fetch, options: RetryOptions): Fetch {
  if (options.retries <= 0) {
    return send;
  }
  return async (request) => {
    if (!SAFE.has(request.method) && !request.headers.has("Idempotency-Key")) {
      return send(request);
    }
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= options.retries;
      // A body can be read once: every attempt but the last sends a copy (one without a body
      // can be sent again as it is).
      const copy = last || request.body === null ? request : request.clone();
      const response = await send(copy);
      if (last || !RETRIED.has(response.status)) {
        return response;
      }
      const wait = waitMs(response.headers.get("Retry-After"), options.backoffMs * 2 ** attempt);
      if (wait > options.maxWaitMs) {
        return response;
      }
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  };
}

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3), else the fallback. */
export function waitMs(retryAfter: string | null, fallbackMs: number): number {
  if (retryAfter === null || retryAfter.trim() === "") {
    return fallbackMs;
  }
  const text = retryAfter.trim();
  if (/^\d+$/.test(text)) {
    return Number(text) * 1000;
  }
  const date = Date.parse(text);
  return Number.isNaN(date) ? fallbackMs : Math.max(0, date - Date.now());
}
