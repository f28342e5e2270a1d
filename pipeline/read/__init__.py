"""The read path: facts at a valid and a transaction time (`facts`), context assembly for a
model (`context`), and stored facts the current catalogue would orphan (`catalog_check`)."""
