"""The bi-temporal ledger: the write path and its judging, fact versions, the decision log and
its event kinds, idempotency, promotion, expiry, forgetting and replay.

Each operation comes twice: `write_fact(unit, ...)`, `promote_fact`, `forget_subject` and
`expire_key` work in the caller's unit of work; `put(store, ...)`, `promote`, `forget` and
`expire` run the same in a transaction of their own.
"""
