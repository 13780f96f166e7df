"""Tests of agenvoy_cli's errormem."""
