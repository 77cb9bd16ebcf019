"""Normalized, columnar tables built from all ranks' dumps: what every analyzer reads."""
