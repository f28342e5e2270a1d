"""The bulk load the read benchmark runs on: about N fact rows (and their claims) over many
tenants and subjects, as a ledger holds them after a few sequential supersessions each, written
by COPY. The rows are made with the ledger's own functions (`new_version`, `claim_columns`), so
they are exactly what puts would have stored; the plain-SQL baseline does not use them.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from plain_sql import COLUMN_LIST, EPISODE
from scratch_databases import libpq_url

from pipeline.db.models import FACT_COLUMNS, ClaimRow
from pipeline.ledger.versions import new_version
from pipeline.ledger.write import claim_columns
from schemas.catalog import Catalog
from schemas.facts import ClaimRecord, FactStatus, Trust
from schemas.fields import canonical_json

COPY_COLUMNS = {"facts": list(FACT_COLUMNS), "claims": [c.name for c in ClaimRow.__table__.columns]}

# Bulk-load shape: attributes a subject may have, and how many intervals a key gets.
LOAD_ATTRIBUTES = (
    "home_city",
    "employer",
    "passport_deadline",
    "birthday",
    "account_plan",
    "contact_channel",
    "monthly_budget",
    "newsletter_opt_in",
    "languages",
)
INTERVAL_WEIGHTS = {1: 55, 2: 25, 3: 12, 4: 8}  # about 2.5 row versions per key
CITIES = ["Lisbon", "Berlin", "Osaka", "Lagos", "Quito", "Hanoi", "Oslo", "Perth", "Tunis", "Lima"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne"]
LANGUAGES = ["en", "fr", "de", "es", "pt", "ja", "sw", "vi"]


class FactRows:
    """Builds `facts` and `claims` rows with the ledger's own functions (`new_version`,
    `claim_columns`), as a verified put of each value would store them."""

    def __init__(self, catalog: Catalog, rng: random.Random | None = None) -> None:
        self.catalog = catalog
        self.rng = rng

    def new_id(self) -> str:
        if self.rng is None:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def claim(
        self,
        *,
        tenant: str,
        subject: str,
        attribute: str,
        value: Any,
        valid_from: datetime,
        recorded_at: datetime,
        valid_to: datetime | None = None,
    ) -> ClaimRecord:
        spec = self.catalog.attributes[attribute]
        return ClaimRecord(
            claim_id=self.new_id(),
            tenant_id=tenant,
            agent_id="default",
            purpose="default",
            subject=subject,
            attribute=attribute,
            cardinality=spec.cardinality,
            value=value,
            value_hash=hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest(),
            kind=spec.kind,
            schema_version=self.catalog.version,
            valid_from=valid_from,
            valid_to=valid_to,
            source_episode_id=EPISODE,
            evidence=None,
            confidence=1.0,
            trust=Trust.VERIFIED,
            recorded_at=recorded_at,
            expires_at=recorded_at + self.catalog.retention(attribute),
        )

    def row(
        self, *, supersedes: str | None = None, claim: ClaimRecord | None = None, **fields: Any
    ) -> dict[str, Any]:
        """The first version of the fact of `claim` (or of a claim made from `fields`)."""
        claim = claim or self.claim(**fields)
        return new_version(
            claim,
            version=1,
            status=FactStatus.ACTIVE,
            valid_to=claim.valid_to,
            supersedes=supersedes,
            now=claim.recorded_at,
        )


@dataclass(frozen=True, slots=True)
class LoadedKey:
    tenant: str
    subject: str
    attribute: str
    first_valid_from: datetime
    first_recorded_at: datetime


def _value(attribute: str, rng: random.Random) -> Any:
    """A plausible value of `attribute` for the bulk load."""
    match attribute:
        case "home_city":
            return f"{rng.choice(CITIES)} {rng.randrange(100)}"
        case "employer":
            return f"{rng.choice(COMPANIES)} {rng.randrange(1000)}"
        case "passport_deadline" | "birthday":
            return (datetime(1960, 1, 1) + timedelta(days=rng.randrange(25_000))).date().isoformat()
        case "account_plan":
            return rng.choice(["free", "pro", "enterprise"])
        case "contact_channel":
            return rng.choice(["email", "phone", "chat"])
        case "monthly_budget":
            return rng.randrange(50, 5000)
        case "newsletter_opt_in":
            return rng.random() < 0.5
        case _:
            raise ValueError(attribute)


def key_rows(
    rows: FactRows, rng: random.Random, now: datetime, tenant: str, subject: str, attribute: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The claims and fact row versions the ledger holds for one key after a few sequential
    supersessions, each with its table."""
    intervals = rng.choices(list(INTERVAL_WEIGHTS), weights=list(INTERVAL_WEIGHTS.values()))[0]
    valid = [now - timedelta(days=rng.uniform(1500, 3000))]
    recorded = [now - timedelta(days=rng.uniform(300, 360))]
    for _ in range(intervals - 1):
        valid.append(valid[-1] + timedelta(days=rng.uniform(30, 360)))
        recorded.append(recorded[-1] + timedelta(days=rng.uniform(1, 60)))
    previous: str | None = None
    for i in range(intervals):
        last = i == intervals - 1
        # A few last intervals were written with their own end (some in the past).
        end = now + timedelta(days=rng.uniform(-200, 400)) if last and rng.random() < 0.05 else None
        if end is not None and end <= valid[i]:
            end = None
        claim = rows.claim(
            tenant=tenant,
            subject=subject,
            attribute=attribute,
            value=_value(attribute, rng),
            valid_from=valid[i],
            recorded_at=recorded[i],
            valid_to=end,
        )
        yield "claims", claim_columns(claim)
        row = rows.row(claim=claim, supersedes=previous)
        if last:
            yield "facts", row
        else:
            # The open version was closed when the next fact arrived; its successor holds
            # the closed interval.
            yield "facts", row | {"superseded_at": recorded[i + 1]}
            closed = {"version": 2, "valid_to": valid[i + 1], "recorded_at": recorded[i + 1]}
            yield "facts", row | closed
        previous = row["fact_id"]


def language_rows(
    rows: FactRows, rng: random.Random, now: datetime, tenant: str, subject: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A multi-valued attribute: one claim and one open fact per value, each in its own slot."""
    for language in rng.sample(LANGUAGES, rng.randint(1, 3)):
        claim = rows.claim(
            tenant=tenant,
            subject=subject,
            attribute="languages",
            value=language,
            valid_from=now - timedelta(days=rng.uniform(100, 3000)),
            recorded_at=now - timedelta(days=rng.uniform(1, 300)),
        )
        yield "claims", claim_columns(claim)
        yield "facts", rows.row(claim=claim)


def generate(
    catalog: Catalog, target: int, seed: int, now: datetime, keys: list[LoadedKey]
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """About `target` fact rows (and their claims) over many tenants and subjects, each with
    its table; appends every key to `keys`."""
    rng = random.Random(seed)
    rows = FactRows(catalog, rng)
    tenants = max(1, target // 2000)
    produced = 0
    number = 0
    while produced < target:
        number += 1
        tenant, subject = f"tenant-{rng.randrange(tenants):05d}", f"user-{number:08d}"
        for attribute in rng.sample(LOAD_ATTRIBUTES, rng.randint(3, len(LOAD_ATTRIBUTES))):
            if attribute == "languages":
                batch = list(language_rows(rows, rng, now, tenant, subject))
            else:
                batch = list(key_rows(rows, rng, now, tenant, subject, attribute))
            facts = [row for table, row in batch if table == "facts"]
            first = min(facts, key=lambda row: row["valid_from"])
            keys.append(
                LoadedKey(tenant, subject, attribute, first["valid_from"], first["recorded_at"])
            )
            for table, row in batch:
                columns = COPY_COLUMNS[table]
                yield (
                    table,
                    tuple(canonical_json(row[c]) if c == "value" else row.get(c) for c in columns),
                )
            produced += len(facts)


def load_facts(url: str, catalog: Catalog, target: int, seed: int) -> tuple[list[LoadedKey], int]:
    """COPY about `target` rows into facts and their claims into claims (with all their
    indexes and constraints), then VACUUM ANALYZE and CHECKPOINT so that later timings see
    settled tables. Returns the keys and the number of fact rows."""
    keys: list[LoadedKey] = []
    now = datetime.now(UTC)
    count = 0
    claim_list = ", ".join(COPY_COLUMNS["claims"])
    # One COPY per connection at a time: the claims go over a second connection alongside.
    with (
        psycopg.connect(libpq_url(url), autocommit=True) as conn,
        psycopg.connect(libpq_url(url), autocommit=True) as claims_conn,
    ):
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY facts ({COLUMN_LIST}) FROM STDIN") as facts_copy,
            claims_conn.cursor() as claims_cursor,
            claims_cursor.copy(f"COPY claims ({claim_list}) FROM STDIN") as claims_copy,
        ):
            for table, record in generate(catalog, target, seed, now, keys):
                if table == "facts":
                    facts_copy.write_row(record)
                    count += 1
                else:
                    claims_copy.write_row(record)
        conn.execute("VACUUM ANALYZE facts, claims")
        conn.execute("CHECKPOINT")
    return keys, count
