"""SGAM over the Model Context Protocol: `sgam mcp` (stdio) and `/mcp` on `sgam serve`."""
