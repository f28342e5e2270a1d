"""The HTTP service's API keys. A key is shown once, when it is created; only a hash of it is
stored, with a short prefix that lets an operator tell keys apart in a listing.

A key fixes the tenant its requests act in and, when set, the agent and purpose; its role says
what it may do (reader < writer < reviewer < admin).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from pipeline.db.base import ID, Base, UtcDateTime

ROLES = ("reader", "writer", "reviewer", "admin")


class ApiKeyRow(Base):
    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    prefix: Mapped[str] = mapped_column(String(32))  # shown in listings: sgam_<key_id>
    secret_hash: Mapped[str] = mapped_column(String(64))  # sha256 of the whole key, hex
    tenant_id: Mapped[str] = mapped_column(ID)
    role: Mapped[str] = mapped_column(String(16))
    agent_id: Mapped[str | None] = mapped_column(ID)  # None: any agent of the tenant
    purpose: Mapped[str | None] = mapped_column(ID)  # None: any purpose
    name: Mapped[str | None] = mapped_column(ID)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        Index(None, "tenant_id"),
        CheckConstraint(f"role IN {ROLES!r}", name="role"),
    )
