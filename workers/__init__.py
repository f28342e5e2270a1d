"""Celery app (`workers.app`) and thin tasks (`workers.tasks`): ids in, one pipeline call each.
Nothing imports this package; `sgam worker` and `sgam beat` start it."""
