/** Every method once against a real `sgam serve`, each answer the API's own JSON. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { createClient, SgamError, type PutBody } from "@sgam/client";

import { admin, baseUrl, episode, subject } from "./environment.js";

test("ingest, episode, episodes and retry answer the API's JSON", async () => {
  const mira = subject("mira");
  const report = await admin.ingest([episode(mira, "my home city is Utrecht")]);
  const [receipt, ...more] = report.receipts ?? [];
  assert.equal(more.length, 0);
  assert.equal(receipt?.status, "done");
  const one = await admin.ingest(episode(mira, "I live in Leiden now", "s2"));
  assert.equal(one.receipts?.length, 1);

  const shown = await admin.episode(receipt!.episode_id);
  assert.equal(shown.episode_id, receipt!.episode_id);
  assert.equal(shown.subject, mira);
  assert.deepEqual(
    shown.facts.map((fact) => fact.value),
    ["Utrecht"],
  );
  const listed = await admin.episodes({ subject: mira });
  assert.equal(listed.length, 2);
  assert.ok(listed.every((stored) => stored.subject === mira));

  // Retry takes only a failed episode: this one is done, so the server refuses it (409).
  await assert.rejects(admin.retry(receipt!.episode_id), (error: unknown) => {
    assert.ok(error instanceof SgamError);
    assert.equal(error.status, 409);
    return true;
  });
});

test("remember, facts, history and context read what was written", async () => {
  const mira = subject("mira");
  const remembered = await admin.remember({
    subject: mira,
    text: "Remember that my passport deadline is June 30, 2026.",
  });
  assert.deepEqual(remembered.rejected, []);
  assert.deepEqual(
    remembered.facts?.map((fact) => fact.attribute),
    ["passport_deadline"],
  );

  const { facts, etag } = await admin.facts(mira);
  assert.deepEqual(
    facts.map((fact) => [fact.attribute, fact.value]),
    [["passport_deadline", "2026-06-30"]],
  );
  assert.equal(etag, null, "an ETag only for one single-valued attribute");

  const context = await admin.context(mira, { query: "passport" });
  assert.ok(context.text.startsWith("- passport_deadline"), context.text);
});

test("putFact writes against facts()'s ETag and a stale If-Match is a 412 SgamError", async () => {
  const noor = subject("noor");
  const before = await admin.facts(noor, { attribute: "home_city" });
  assert.deepEqual(before.facts, []);
  assert.equal(before.etag, '"0"');

  const city = (value: string, validFrom: string): PutBody => ({
    subject: noor,
    attribute: "home_city",
    value,
    valid_from: validFrom,
    source_episode_id: "e1",
  });
  const written = await admin.putFact(city("Utrecht", "2026-01-01T00:00:00Z"), { ifMatch: before.etag! });
  assert.equal(written.written, true);
  assert.equal(written.fact.value, "Utrecht");

  // The tag read before the write is stale now.
  const moved = city("Leiden", "2026-03-01T00:00:00Z");
  await assert.rejects(admin.putFact(moved, { ifMatch: before.etag! }), (error: unknown) => {
    assert.ok(error instanceof SgamError);
    assert.equal(error.status, 412);
    assert.equal(error.type, "urn:sgam:problem:version-conflict");
    assert.equal(error.problem.status, 412);
    assert.equal(typeof error.title, "string");
    assert.equal(typeof error.detail, "string");
    return true;
  });
  const after = await admin.facts(noor, { attribute: "home_city" });
  assert.deepEqual(
    after.facts.map((fact) => fact.value),
    ["Utrecht"],
  );
  const current = await admin.putFact(moved, { ifMatch: after.etag! });
  assert.equal(current.fact.value, "Leiden");

  const history = await admin.history(noor, "home_city");
  assert.deepEqual(
    history.map((fact) => [fact.value, fact.valid_from, fact.valid_to]),
    [
      ["Utrecht", "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z"],
      ["Leiden", "2026-03-01T00:00:00Z", null],
    ],
  );
});

test("candidates, confirm and reject decide the recurrence buffer", async () => {
  const sam = subject("sam");
  await admin.ingest([episode(sam, "I prefer concise answers"), episode(sam, "please contact me by email", "s2")]);
  const waiting = await admin.candidates({ subject: sam });
  const byAttribute = new Map(waiting.map((candidate) => [candidate.attribute, candidate.candidate_id]));
  assert.deepEqual([...byAttribute.keys()].sort(), ["answer_style", "contact_channel"]);

  const confirmed = await admin.confirm(byAttribute.get("contact_channel")!);
  assert.equal(confirmed.fact?.value, "email");
  const rejected = await admin.reject(byAttribute.get("answer_style")!, { reason: "said in jest" });
  assert.equal(rejected.status, "rejected");
  const logged = await admin.log({ subject: sam });
  assert.ok(
    logged.some((entry) => entry.kind === "candidate_rejected" && entry.reason?.endsWith(": said in jest")),
    JSON.stringify(logged.map((entry) => [entry.kind, entry.reason])),
  );
  assert.deepEqual(await admin.candidates({ subject: sam }), []);
  const all = await admin.candidates({ subject: sam, status: "all" });
  assert.equal(all.length, 2);
});

test("quarantine, promote and dismiss release or refuse untrusted facts", async () => {
  const ada = subject("ada");
  const untrusted = { subject: ada, valid_from: "2026-01-01T00:00:00Z", source_episode_id: "e1", trust: "untrusted" } as const;
  await admin.putFact({ ...untrusted, attribute: "employer", value: "Globex" });
  await admin.putFact({ ...untrusted, attribute: "home_city", value: "Rotterdam" });
  const held = await admin.quarantine({ subject: ada });
  assert.deepEqual(held.map((fact) => fact.attribute).sort(), ["employer", "home_city"]);
  const employer = held.find((fact) => fact.attribute === "employer")!;
  const city = held.find((fact) => fact.attribute === "home_city")!;

  const promoted = await admin.promote(employer.fact_id, { ifMatch: employer.version });
  assert.equal(promoted.fact.trust, "verified");
  const dismissed = await admin.dismiss(city.fact_id, { reason: "not what she said" });
  assert.equal(dismissed.fact.fact_id, city.fact_id);
  assert.deepEqual(await admin.quarantine({ subject: ada }), []);
  const { facts } = await admin.facts(ada);
  assert.deepEqual(
    facts.map((fact) => [fact.attribute, fact.value]),
    [["employer", "Globex"]],
  );
  const log = await admin.log({ subject: ada });
  assert.ok(log.length >= 2, JSON.stringify(log));
});

test("forget then facts is empty", async () => {
  const lee = subject("lee");
  await admin.remember({ subject: lee, text: "Remember that my passport deadline is June 30, 2026." });
  await admin.ingest(episode(lee, "my home city is Utrecht"));
  assert.equal((await admin.facts(lee)).facts.length, 2);
  const forgotten = await admin.forget(lee);
  assert.ok(forgotten.hidden >= 2, JSON.stringify(forgotten));
  assert.deepEqual((await admin.facts(lee)).facts, []);
  assert.deepEqual(await admin.history(lee, "home_city"), []);
});

test("usage and the keys: create, list, revoke; a revoked key is refused with 401", async () => {
  const usage = await admin.usage({ since: "2026-01-01T00:00:00Z" });
  assert.ok(Array.isArray(usage.rows), JSON.stringify(usage));

  const issued = await admin.keys.create({ role: "reader", name: "typescript-test" });
  assert.equal(issued.key.role, "reader");
  const listed = await admin.keys.list();
  assert.ok(listed.some((key) => key.key_id === issued.key.key_id));
  const reader = createClient({ baseUrl, apiKey: issued.secret });
  assert.deepEqual((await reader.facts(subject("nobody"))).facts, []);

  const revoked = await admin.keys.revoke(issued.key.key_id);
  assert.ok(revoked.revoked_at);
  await assert.rejects(reader.facts(subject("nobody")), (error: unknown) => {
    assert.ok(error instanceof SgamError);
    assert.equal(error.status, 401);
    assert.equal(error.type, "urn:sgam:problem:unauthorized");
    return true;
  });
});
