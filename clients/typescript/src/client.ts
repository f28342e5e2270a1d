/**
 * `createClient`: one method per operation of the SGAM API, answering the API's own JSON
 * (snake_case, nothing renamed), every non-2xx answer thrown as an `SgamError`. The calls go
 * through openapi-fetch, typed by the generated `schema.ts`; `raw` is that typed client, for
 * the whole document.
 */
import createFetchClient, { type Client } from "openapi-fetch";

import { errorOf } from "./errors.js";
import { type Fetch, retrying } from "./retry.js";
import type { components, operations } from "./schema.js";
import type { SearchAnswer, SearchKind, WithSearch } from "./search.js";

export type Schemas = components["schemas"];
type PutResult = Schemas["PutResult"];
type Fact = Schemas["Fact"];
/** An operation's JSON request body, as the document (and so the catalogue) states it. */
export type BodyOf<K extends keyof operations> = NonNullable<
  operations[K]["requestBody"]
>["content"]["application/json"];
type QueryOf<K extends keyof operations> = NonNullable<operations[K]["parameters"]["query"]>;
/** A fact to write: one body per catalogue attribute, its value typed. */
export type PutBody = BodyOf<"put_fact">;
export type EpisodeBody = Schemas["EpisodeBody"];
/** An attribute of the catalogue the document was generated for. */
export type Attribute = NonNullable<QueryOf<"get_facts">["attribute"]>;

export interface ClientOptions {
  /** Where the server is, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The API key (`sgam keys create`), sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** How many times a 429 or 503 is retried, honouring Retry-After (default 2). */
  retries?: number;
  /** The longest Retry-After waited out; a longer one is thrown (default 30 000 ms). */
  maxRetryWaitMs?: number;
  /** The fetch to send with (default: the global one). */
  fetch?: Fetch;
}

/**
 * A write's Idempotency-Key: a string of your own, `false` for none (the write is then never
 * retried), or left out for a new one per call (so a retried call never writes twice).
 */
export interface Idempotent {
  idempotencyKey?: string | false;
}

/** The scope a read names; the key's own binding when left out. */
export interface Scope {
  agent?: string;
  purpose?: string;
  tenant?: string;
}

export interface FactsQuery extends Scope {
  attribute?: Attribute;
  /** The valid time to read at (RFC 3339; default now). */
  at?: string;
  /** Read as believed at this time (RFC 3339). */
  knownAt?: string;
  /** Include quarantined facts (reviewer role). */
  includeQuarantined?: boolean;
}

export interface Facts {
  facts: Fact[];
  /** The key's state tag, for `putFact`'s `ifMatch`: sent for a single-valued `attribute`. */
  etag: string | null;
}

export interface SearchQuery extends Scope {
  query: string;
  kinds?: SearchKind[];
  limit?: number;
  at?: string;
  knownAt?: string;
  includeQuarantined?: boolean;
}

export function createClient(options: ClientOptions) {
  const send = retrying(options.fetch ?? ((request) => globalThis.fetch(request)), {
    retries: options.retries ?? 2,
    maxWaitMs: options.maxRetryWaitMs ?? 30_000,
    backoffMs: 500,
  });
  const raw: Client<WithSearch> = createFetchClient<WithSearch>({
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    headers: { Authorization: `Bearer ${options.apiKey}` },
    fetch: send,
  });

  return {
    raw,

    /** The hot path: remember an explicit statement now. */
    async remember(body: Schemas["RememberBody"], { idempotencyKey }: Idempotent = {}) {
      const header = keyHeader(idempotencyKey, body.idempotency_key);
      return ok(raw.POST("/v1/remember", { body, params: { header } }));
    },

    /** What holds for a subject, and the ETag to write against. */
    async facts(subject: string, query: FactsQuery = {}): Promise<Facts> {
      const answer = await raw.GET("/v1/subjects/{subject}/facts", {
        params: {
          path: { subject },
          query: {
            ...scopeQuery(query),
            attribute: query.attribute,
            at: query.at,
            known_at: query.knownAt,
            include_quarantined: query.includeQuarantined,
          },
        },
      });
      return { facts: checked(answer), etag: answer.response.headers.get("ETag") };
    },

    /** Write a fact; `ifMatch` is `facts()`'s etag (412 when the key was written since). */
    async putFact(
      body: PutBody,
      { ifMatch, idempotencyKey }: Idempotent & { ifMatch?: string } = {},
    ): Promise<PutResult> {
      const header = { ...keyHeader(idempotencyKey), ...(ifMatch ? { "If-Match": ifMatch } : {}) };
      return ok(raw.PUT("/v1/facts", { body, params: { header } }));
    },

    /** Every interval of an attribute (or, with `versions`, every row version). */
    async history(
      subject: string,
      attribute: Attribute,
      query: Scope & { knownAt?: string; versions?: boolean } = {},
    ) {
      return ok(
        raw.GET("/v1/subjects/{subject}/attributes/{attribute}/history", {
          params: {
            path: { subject, attribute },
            query: { ...scopeQuery(query), known_at: query.knownAt, versions: query.versions },
          },
        }),
      );
    },

    /** The smallest cited context about a subject that fits a token budget. */
    async context(subject: string, query: Scope & { query?: string; budgetTokens?: number } = {}) {
      return ok(
        raw.GET("/v1/subjects/{subject}/context", {
          params: {
            path: { subject },
            query: { ...scopeQuery(query), query: query.query, budget_tokens: query.budgetTokens },
          },
        }),
      );
    },

    /** Facts and episodes about a subject that match a query, best first. */
    async search(subject: string, query: SearchQuery): Promise<SearchAnswer> {
      return ok(
        raw.GET("/v1/subjects/{subject}/search", {
          params: {
            path: { subject },
            query: {
              ...scopeQuery(query),
              query: query.query,
              kinds: query.kinds?.join(","),
              limit: query.limit,
              at: query.at,
              known_at: query.knownAt,
              include_quarantined: query.includeQuarantined,
            },
          },
        }),
      );
    },

    /** Store one episode or a batch; the workers (or this request) extract from them. */
    async ingest(episodes: EpisodeBody | EpisodeBody[], { idempotencyKey }: Idempotent = {}) {
      // A batch's episodes are keyed from the header; one that has its own keeps it.
      const own = Array.isArray(episodes)
        ? episodes.find((episode) => episode.idempotency_key)?.idempotency_key
        : episodes.idempotency_key;
      const header =
        own && idempotencyKey === undefined ? ownKey(episodes, own) : keyHeader(idempotencyKey);
      return ok(raw.POST("/v1/episodes", { body: episodes, params: { header } }));
    },

    /** An episode, its candidates, the decisions taken for it and its facts. */
    async episode(episodeId: string) {
      return ok(
        raw.GET("/v1/episodes/{episode_id}", { params: { path: { episode_id: episodeId } } }),
      );
    },

    /** The tenant's episodes with their states. */
    async episodes(
      query: { status?: Schemas["EpisodeStatus"]; sessionId?: string; subject?: string; limit?: number } = {},
    ) {
      const { status, sessionId, subject, limit } = query;
      return ok(
        raw.GET("/v1/episodes", {
          params: { query: { status, session_id: sessionId, subject, limit } },
        }),
      );
    },

    /** A failed episode back to work. */
    async retry(episodeId: string, { idempotencyKey }: Idempotent = {}) {
      return ok(
        raw.POST("/v1/episodes/{episode_id}/retry", {
          params: { path: { episode_id: episodeId }, header: keyHeader(idempotencyKey) },
        }),
      );
    },

    /** Candidates in the recurrence buffer (buffered by default, or `status: "all"`). */
    async candidates(query: QueryOf<"list_candidates"> = {}) {
      return ok(raw.GET("/v1/candidates", { params: { query } }));
    },

    /** Confirm a buffered candidate: it becomes a fact. */
    async confirm(candidateId: string, { idempotencyKey }: Idempotent = {}) {
      return ok(
        raw.POST("/v1/candidates/{candidate_id}/confirm", {
          params: { path: { candidate_id: candidateId }, header: keyHeader(idempotencyKey) },
        }),
      );
    },

    /** Drop a buffered candidate for good; `reason` goes to the decision log. */
    async reject(
      candidateId: string,
      { reason, idempotencyKey }: Idempotent & { reason?: string } = {},
    ) {
      return ok(
        raw.POST("/v1/candidates/{candidate_id}/reject", {
          params: {
            path: { candidate_id: candidateId },
            query: { reason },
            header: keyHeader(idempotencyKey),
          },
        }),
      );
    },

    /** Quarantined facts waiting for a reviewer. */
    async quarantine(query: { subject?: string; limit?: number } = {}) {
      return ok(raw.GET("/v1/quarantine", { params: { query } }));
    },

    /** Release a quarantined fact; `ifMatch` is its `version` (412 when stale). */
    async promote(
      factId: string,
      { ifMatch, idempotencyKey }: Idempotent & { ifMatch?: string | number } = {},
    ): Promise<PutResult> {
      const match = ifMatch === undefined ? {} : { "If-Match": String(ifMatch) };
      return ok(
        raw.POST("/v1/facts/{fact_id}/promote", {
          params: { path: { fact_id: factId }, header: { ...keyHeader(idempotencyKey), ...match } },
        }),
      );
    },

    /** Refuse a quarantined fact for good; `reason` goes to the decision log. */
    async dismiss(
      factId: string,
      { reason, idempotencyKey }: Idempotent & { reason?: string } = {},
    ): Promise<PutResult> {
      return ok(
        raw.POST("/v1/facts/{fact_id}/dismiss", {
          params: {
            path: { fact_id: factId },
            query: { reason },
            header: keyHeader(idempotencyKey),
          },
        }),
      );
    },

    /** Forget a subject (admin); `purge` also erases its content. */
    async forget(subject: string, { purge, idempotencyKey }: Idempotent & { purge?: boolean } = {}) {
      return ok(
        raw.DELETE("/v1/subjects/{subject}", {
          params: { path: { subject }, query: { purge }, header: keyHeader(idempotencyKey) },
        }),
      );
    },

    /** The tenant's decision log, newest first (reviewer). */
    async log(
      query: { subject?: string; since?: string; until?: string; limit?: number; oldestFirst?: boolean } = {},
    ) {
      const { oldestFirst, ...rest } = query;
      return ok(raw.GET("/v1/log", { params: { query: { ...rest, oldest_first: oldestFirst } } }));
    },

    /** The tenant's model usage (admin). */
    async usage(query: { since?: string } = {}) {
      return ok(raw.GET("/v1/usage", { params: { query } }));
    },

    /** The tenant's API keys (admin). */
    keys: {
      async list() {
        return ok(raw.GET("/v1/keys"));
      },
      /** A new key; its secret is in this answer only. */
      async create(body: Schemas["KeyBody"]) {
        return ok(raw.POST("/v1/keys", { body }));
      },
      async revoke(keyId: string) {
        return ok(raw.DELETE("/v1/keys/{key_id}", { params: { path: { key_id: keyId } } }));
      },
    },
  };
}

export type SgamClient = ReturnType<typeof createClient>;

interface Answered<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The answer's JSON, or its problem thrown as an SgamError. */
async function ok<T>(pending: Promise<Answered<T>>): Promise<T> {
  return checked(await pending);
}

function checked<T>({ data, error, response }: Answered<T>): T {
  if (!response.ok) {
    throw errorOf(response, error);
  }
  return data as T;
}

function keyHeader(given: string | false | undefined, own?: string | null) {
  if (given === false) {
    return {};
  }
  return { "Idempotency-Key": given ?? own ?? globalThis.crypto.randomUUID() };
}

/** A single episode's own key is the header; a batch whose episodes carry theirs sends none. */
function ownKey(episodes: EpisodeBody | EpisodeBody[], own: string) {
  return Array.isArray(episodes) ? {} : { "Idempotency-Key": own };
}

function scopeQuery(scope: Scope) {
  return { agent_id: scope.agent, purpose: scope.purpose, tenant_id: scope.tenant };
}
