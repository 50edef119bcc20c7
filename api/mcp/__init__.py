"""The MCP server: the agent API's operations as MCP tools, over Streamable HTTP (``/mcp``) and stdio."""
