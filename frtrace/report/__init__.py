"""Turning tables and findings into text, tables and JSON for people and machines."""
