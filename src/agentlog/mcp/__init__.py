"""The MCP server the agents use (stdio or HTTP): ``server`` runs it, ``tools`` defines its tools."""
