export { createClient } from "./client.js";
export type {
  Attribute,
  BodyOf,
  ClientOptions,
  EpisodeBody,
  Facts,
  FactsQuery,
  Idempotent,
  PutBody,
  Schemas,
  Scope,
  SearchQuery,
  SgamClient,
} from "./client.js";
export { SgamError } from "./errors.js";
export type { Problem } from "./errors.js";
export type { Fetch } from "./retry.js";
export type { SearchAnswer, SearchHit, SearchKind } from "./search.js";
export type { components, operations, paths } from "./schema.js";
