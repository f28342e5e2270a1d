/**
 * A Node chat handler with SGAM as its memory: every turn is ingested (the workers extract what
 * it states), the context is read before answering, and an explicit "remember that ..." is
 * remembered at once. `answer` stands in for your model call.
 *
 * Run it against a server: SGAM_BASE_URL=http://127.0.0.1:8080 SGAM_API_KEY=... node chat-backend.js
 */
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";

import { createClient, SgamError } from "@sgam/client";

const memory = createClient({
  baseUrl: process.env.SGAM_BASE_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.SGAM_API_KEY ?? "",
});

/** Your model: here, an echo of what it was given. */
async function answer(system: string, message: string): Promise<string> {
  return `(knowing:\n${system || "nothing yet"})\nYou said: ${message}`;
}

export async function handleTurn(userId: string, sessionId: string, message: string): Promise<string> {
  // An explicit instruction is remembered now, on the hot path, and read back at once.
  if (/^remember that /i.test(message)) {
    const remembered = await memory.remember({ subject: userId, text: message, session_id: sessionId });
    const saved = remembered.facts?.map((fact) => fact.attribute).join(", ");
    return saved ? `Noted (${saved}).` : "I could not find a fact in that to remember.";
  }
  // Every other turn goes to the workers; the turn's own id makes a retried request harmless.
  await memory.ingest(
    { subject: userId, session_id: sessionId, occurred_at: new Date().toISOString(), text: message },
    { idempotencyKey: `turn-${sessionId}-${randomUUID()}` },
  );
  // What is known about the user, within a token budget, for the model's system prompt.
  const context = await memory.context(userId, { query: message, budgetTokens: 400 });
  return answer(context.text, message);
}

// A short conversation, when run as a program.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const user = process.env.SGAM_EXAMPLE_USER ?? "mira";
  const session = randomUUID();
  try {
    console.log(await handleTurn(user, session, "my home city is Utrecht"));
    console.log(await handleTurn(user, session, "Remember that my employer is Globex."));
    console.log(await handleTurn(user, session, "what should I do before my trip?"));
  } catch (error) {
    if (error instanceof SgamError) {
      console.error(`SGAM refused: ${error.status} ${error.type}: ${error.detail ?? error.title}`);
      process.exit(1);
    }
    throw error;
  }
}
