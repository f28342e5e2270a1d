"""The search read's optional embedding arm: vectors of facts and episodes from an
OpenAI-compatible `/v1/embeddings` endpoint (`client`), stored in SGAM's own tables and filled
after the ledger's writes, never inside them (`vectors`), with what they cost (`spend`)."""
