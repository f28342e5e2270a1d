/** What the suite that started the servers tells the tests (tests/integration/api/test_typescript_client.py). */
import { createClient } from "@sgam/client";

export function need(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests through the Python suite, which starts the server`);
  }
  return value;
}

export const baseUrl = need("SGAM_TS_BASE_URL");
export const adminKey = need("SGAM_TS_ADMIN_KEY");
export const admin = createClient({ baseUrl, apiKey: adminKey });

/** A subject of the test's own, so the tests keep apart on one tenant. */
export function subject(name: string): string {
  return `${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

export function episode(subjectName: string, text: string, session = "s1") {
  return { subject: subjectName, session_id: session, occurred_at: "2026-06-01T10:00:00+02:00", text };
}
