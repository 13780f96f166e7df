"""Tests of agenvoy_cli's vectors."""
