"""Seeing what the pipeline does: traces (`tracing`), with the names they use (`conventions`).
Nothing here ever records a stored value: only ids, counts, names and outcomes."""
