/**
 * The search read, `GET /v1/subjects/{subject}/search`, typed by hand to its agreed contract
 * until the document carries it: once `npm run generate` finds the path in openapi.json, the
 * generated types are used instead and these are never read (see `WithSearch`).
 */
import type { components, paths } from "./schema.js";

type Fact = components["schemas"]["Fact"];

/** Which kinds of memory a search reads. */
export type SearchKind = "facts" | "episodes";

export interface SearchHit {
  episode_id: string;
  occurred_at: string;
  session_id: string;
  snippet: string;
  score: number;
}

interface HandTypedAnswer {
  query: string;
  facts: (Fact & { score: number })[];
  episodes: SearchHit[];
}

export interface SearchPath {
  "/v1/subjects/{subject}/search": {
    parameters: { query?: never; header?: never; path?: never; cookie?: never };
    get: {
      parameters: {
        query: {
          query: string;
          kinds?: string;
          limit?: number;
          at?: string;
          known_at?: string;
          agent_id?: string;
          purpose?: string;
          tenant_id?: string;
          include_quarantined?: boolean;
        };
        header?: never;
        path: { subject: string };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: { "application/json": HandTypedAnswer };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
}

/** The document's paths, plus the search read while the document does not have it. */
export type WithSearch = "/v1/subjects/{subject}/search" extends keyof paths
  ? paths
  : paths & SearchPath;

/** The search's answer: the generated type once the document has the endpoint. */
export type SearchAnswer =
  WithSearch["/v1/subjects/{subject}/search"]["get"]["responses"][200]["content"]["application/json"];
