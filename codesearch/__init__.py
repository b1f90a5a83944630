"""Semantic code search over a folder: `python -m codesearch "QUERY" --path DIR`."""
