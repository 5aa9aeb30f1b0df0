"""Installing our hooks and MCP server into the agents' own configs, and checking them (doctor)."""
