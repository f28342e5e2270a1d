"""Who may call the HTTP service: API keys with a tenant, an optional agent and purpose, and a
role."""
