"""The policy stage: what happens to each extracted candidate, decided by pure functions over
the candidate, its catalogue entry and the episode's source and trust (`decide`), then carried
out in the caller's unit of work (`apply`)."""
