"""Engram's Python client."""
