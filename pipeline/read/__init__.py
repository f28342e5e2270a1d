"""The read path: facts at a valid and a transaction time (`facts`), and context assembly
for a model (`context`)."""
