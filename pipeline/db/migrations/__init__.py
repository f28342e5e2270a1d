"""Alembic migrations of the SGAM database (`versions/`).

`HEAD` is the newest revision, kept here so that checking a database's schema needs no Alembic
import at start-up; a test keeps it equal to Alembic's own head.
"""

HEAD = "0011"
