/** search(): facts and episodes about a subject that match a query, best first. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { admin, episode, subject } from "./environment.js";

test("search finds the fact and the episode that name the query", async () => {
  const mira = subject("mira");
  await admin.ingest(episode(mira, "my home city is Utrecht"));
  await admin.ingest(episode(mira, "we talked about the weather in spring", "s2"));
  const found = await admin.search(mira, { query: "Utrecht", kinds: ["facts", "episodes"], limit: 5 });
  assert.equal(found.query, "Utrecht");
  // The document lists neither list as required, though the server always sends both.
  const facts = found.facts ?? [];
  const episodes = found.episodes ?? [];
  assert.deepEqual(
    facts.map((fact) => fact.value),
    ["Utrecht"],
  );
  assert.ok(facts.every((fact) => typeof fact.score === "number"));
  assert.ok(episodes.length >= 1);
  assert.ok(episodes[0]?.snippet.includes("Utrecht"), JSON.stringify(episodes));

  const onlyFacts = await admin.search(mira, { query: "Utrecht", kinds: ["facts"] });
  assert.deepEqual(onlyFacts.episodes, []);
});
