"""The home's config.json (upstream's file, only ever read) added to an entry point's
settings (agenvoy_cli/settings.py: every knob, the environment read once)."""

from __future__ import annotations

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home.files import read_json
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.settings import Settings


def load_settings(layout: Layout, settings: Settings | None = None) -> Settings:
    """`settings` (an entry point's; None: the process environment's) with the home's
    config.json. BadInput when config.json is not an object or its limits are malformed."""
    data = read_json(layout.config, default={})
    if not isinstance(data, dict):
        raise BadInput(f"{layout.config}: expected a JSON object")
    return (settings or Settings.from_environment()).with_config(data)
