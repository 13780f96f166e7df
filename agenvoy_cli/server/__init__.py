"""`agenvoy mcp`: the memory as an MCP server (stdio, or streamable HTTP), warm and indexing
ahead.

tools     the tool definitions (upstream Agenvoy's names, parameters and limits)
args      checking a tool call's arguments (one-line messages, as the CLI's)
handlers  each tool, on the layers below: (text for the model, structured content)
worker    the one thread that touches the Store, and the background indexer
app       the MCP wiring (official SDK, low-level server), signals and shutdown
http_server  `--http`: the same server over streamable HTTP, the bearer token, the fast route
fastpath  the CLI's client for that route (standard library only)

Only this package imports the `mcp` SDK, and only when the command runs.
"""
