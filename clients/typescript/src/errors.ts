/** The error every non-2xx answer throws: the server's RFC 9457 problem document, whole. */

/** A problem document as SGAM sends it (`application/problem+json`). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  /** The request field the problem names, when it names one. */
  field?: string;
  [member: string]: unknown;
}

export class SgamError extends Error {
  override readonly name = "SgamError";
  readonly status: number;
  /** The problem's stable type, e.g. `urn:sgam:problem:version-conflict`. */
  readonly type: string;
  readonly title: string;
  readonly detail: string | undefined;
  /** The whole problem document (or a stand-in when the body was not one). */
  readonly problem: Problem;
  /** The answer's headers (Retry-After, ETag, ...). */
  readonly headers: Headers;

  constructor(problem: Problem, headers: Headers) {
    super(problem.detail ? `${problem.title}: ${problem.detail}` : problem.title);
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.problem = problem;
    this.headers = headers;
  }
}

/** The SgamError for a non-2xx answer whose body openapi-fetch has already read. */
export function errorOf(response: Response, body: unknown): SgamError {
  if (isProblem(body)) {
    return new SgamError(body, response.headers);
  }
  // Not a problem document (a proxy's page, an empty body): the status says what is known.
  const detail = typeof body === "string" && body !== "" ? body.slice(0, 500) : undefined;
  const problem: Problem = {
    type: "about:blank",
    title: response.statusText || `HTTP ${response.status}`,
    status: response.status,
    ...(detail === undefined ? {} : { detail }),
  };
  return new SgamError(problem, response.headers);
}

function isProblem(body: unknown): body is Problem {
  if (typeof body !== "object" || body === null) {
    return false;
  }
  const { type, title, status } = body as Record<string, unknown>;
  return typeof type === "string" && typeof title === "string" && typeof status === "number";
}
