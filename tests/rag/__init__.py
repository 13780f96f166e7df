"""Tests of agenvoy_cli's rag."""
