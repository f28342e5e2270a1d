"""Celery app and thin tasks (ids in, one pipeline call each). Nothing imports this package.

The ledger and lifecycle are complete without workers; ingestion and extraction add the tasks.
"""
