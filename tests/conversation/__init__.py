"""Tests of agenvoy_cli's conversation."""
