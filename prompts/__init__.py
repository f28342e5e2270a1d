"""Versioned prompt templates, `prompts/<stage>/v<N>.j2`, loaded by name; the name and version
are recorded with each write that a prompt produced. Extraction adds the first template."""
