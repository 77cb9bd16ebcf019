"""Analyzers: each reads the shared tables and returns findings (one module per reasoning)."""
