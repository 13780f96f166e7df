"""Storage: the only write API. No click in here; raises agenvoy_cli.errors."""
