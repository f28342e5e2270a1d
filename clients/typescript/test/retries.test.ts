/** Idempotency keys, retries of 429 and 503, and what is not an SgamError. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { createClient, SgamError, type Fetch } from "@sgam/client";

import { admin, adminKey, baseUrl, episode, need, subject } from "./environment.js";

test("a replayed idempotency key answers the same and writes nothing again", async () => {
  const mira = subject("mira");
  const said = { subject: mira, text: "Remember that my passport deadline is June 30, 2026." };
  const key = `ts-${mira}`;
  const first = await admin.remember(said, { idempotencyKey: key });
  const episodes = await admin.episodes({ subject: mira });
  assert.equal(episodes.length, 1);

  const again = await admin.raw.POST("/v1/remember", {
    body: said,
    params: { header: { "Idempotency-Key": key } },
  });
  assert.equal(again.response.headers.get("Idempotent-Replayed"), "true");
  assert.deepEqual(again.data, first);
  assert.deepEqual(await admin.remember(said, { idempotencyKey: key }), first);
  assert.equal((await admin.episodes({ subject: mira })).length, 1, "no second episode");
  assert.equal((await admin.facts(mira)).facts.length, 1, "no second fact");

  // Without a key of the caller's own, each call gets a new one: the same text is a new episode.
  await admin.remember(said);
  assert.equal((await admin.episodes({ subject: mira })).length, 2);
});

test("a 429 with Retry-After is waited out, and a write without a key is not retried", async () => {
  const limitedUrl = need("SGAM_TS_LIMITED_URL");
  // The limited server allows one request a second, in bursts of one.
  const limited = createClient({ baseUrl: limitedUrl, apiKey: need("SGAM_TS_LIMITED_KEY") });
  const once = createClient({ baseUrl: limitedUrl, apiKey: need("SGAM_TS_LIMITED_KEY"), retries: 0 });
  const lee = subject("lee");

  await limited.facts(lee); // takes the one token
  const refused = await once.facts(lee).then(
    () => assert.fail("the second request within the second was let through"),
    (error: unknown) => error,
  );
  assert.ok(refused instanceof SgamError);
  assert.equal(refused.status, 429);
  assert.equal(refused.type, "urn:sgam:problem:rate-limited");
  const retryAfter = Number(refused.headers.get("Retry-After"));
  assert.ok(retryAfter >= 1, `Retry-After: ${retryAfter}`);

  const started = performance.now();
  assert.deepEqual((await limited.facts(lee)).facts, []);
  const waited = performance.now() - started;
  assert.ok(waited >= 900, `answered after ${waited.toFixed(0)} ms: the 429 was not waited out`);

  // A write told to carry no key is sent once: the 429 is the caller's.
  await assert.rejects(
    limited.remember({ subject: lee, text: "Remember that my passport deadline is June 30, 2026." }, { idempotencyKey: false }),
    (error: unknown) => error instanceof SgamError && error.status === 429,
  );
  // With its key, the same write waits its turn and is written once.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  await limited.facts(lee);
  const written = await limited.remember({ subject: lee, text: "Remember that my passport deadline is June 30, 2026." });
  assert.deepEqual(written.rejected, []);
  assert.equal((await admin.episodes({ subject: lee })).length, 1, "written once");
});

/** The real server's answers, the first `busy` of them replaced by a 503. */
function busyFirst(busy: number): { fetch: Fetch; sent: string[] } {
  const sent: string[] = [];
  const fetch: Fetch = async (request) => {
    sent.push(request.headers.get("Idempotency-Key") ?? "none");
    if (sent.length <= busy) {
      const problem = { type: "urn:sgam:problem:store-unavailable", title: "Busy", status: 503, instance: "/" };
      return new Response(JSON.stringify(problem), {
        status: 503,
        headers: { "Content-Type": "application/problem+json", "Retry-After": "0" },
      });
    }
    return globalThis.fetch(request);
  };
  return { fetch, sent };
}

test("a 503 is retried with the same idempotency key, up to `retries` times", async () => {
  const noor = subject("noor");
  const said = { subject: noor, text: "Remember that my passport deadline is June 30, 2026." };
  const twice = busyFirst(2);
  const client = createClient({ baseUrl, apiKey: adminKey, fetch: twice.fetch });
  const remembered = await client.remember(said);
  assert.deepEqual(remembered.rejected, []);
  assert.equal(twice.sent.length, 3);
  assert.equal(new Set(twice.sent).size, 1, "every attempt carries the call's one key");
  assert.notEqual(twice.sent[0], "none");

  const thrice = busyFirst(3);
  const gives = createClient({ baseUrl, apiKey: adminKey, fetch: thrice.fetch });
  await assert.rejects(gives.facts(noor), (error: unknown) => error instanceof SgamError && error.status === 503);
  assert.equal(thrice.sent.length, 3, "the first try and two retries");

  const unkeyed = busyFirst(1);
  const plain = createClient({ baseUrl, apiKey: adminKey, fetch: unkeyed.fetch });
  await assert.rejects(plain.ingest(episode(noor, "hello"), { idempotencyKey: false }), (error: unknown) => {
    return error instanceof SgamError && error.status === 503;
  });
  assert.deepEqual(unkeyed.sent, ["none"], "a write without a key is sent once");
  assert.equal((await admin.episodes({ subject: noor })).length, 1, "the remember only");
});

test("confirm, reject and retry carry a key per call: retried after a 503, decided once", async () => {
  const sam = subject("sam");
  const report = await admin.ingest([episode(sam, "I prefer concise answers"), episode(sam, "please contact me by email", "s2")]);
  const waiting = await admin.candidates({ subject: sam });
  const byAttribute = new Map(waiting.map((candidate) => [candidate.attribute, candidate.candidate_id]));

  const confirming = busyFirst(1);
  const confirmer = createClient({ baseUrl, apiKey: adminKey, fetch: confirming.fetch });
  const confirmed = await confirmer.confirm(byAttribute.get("contact_channel")!);
  assert.equal(confirmed.status, "confirmed");
  assert.equal(confirming.sent.length, 2, "the 503 was retried");
  assert.equal(new Set(confirming.sent).size, 1, "with the call's one key");
  assert.notEqual(confirming.sent[0], "none");

  const key = `ts-reject-${sam}`;
  const rejected = await admin.reject(byAttribute.get("answer_style")!, { reason: "no", idempotencyKey: key });
  assert.deepEqual(await admin.reject(byAttribute.get("answer_style")!, { reason: "no", idempotencyKey: key }), rejected);
  const kinds = (await admin.log({ subject: sam })).map((entry) => entry.kind);
  assert.equal(kinds.filter((kind) => kind === "candidate_confirmed").length, 1);
  assert.equal(kinds.filter((kind) => kind === "candidate_rejected").length, 1);

  // A done episode is not failed (409), but the call was retried after the 503 with its key.
  const retrying = busyFirst(1);
  const retrier = createClient({ baseUrl, apiKey: adminKey, fetch: retrying.fetch });
  await assert.rejects(retrier.retry(report.receipts![0]!.episode_id), (error: unknown) => {
    return error instanceof SgamError && error.type === "urn:sgam:problem:not-failed";
  });
  assert.equal(retrying.sent.length, 2);
  assert.equal(new Set(retrying.sent).size, 1);
  assert.notEqual(retrying.sent[0], "none");
});

test("a network failure is not an SgamError", async () => {
  const nowhere = createClient({ baseUrl: "http://127.0.0.1:9", apiKey: adminKey });
  await assert.rejects(nowhere.facts("mira"), (error: unknown) => {
    assert.ok(!(error instanceof SgamError));
    assert.ok(error instanceof TypeError, String(error));
    return true;
  });
});
