"""`agenvoy web`: a local, server-rendered viewer of the home (docs/web.md)."""
