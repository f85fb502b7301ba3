"""Renderers: pure functions from summaries / reports to text, markdown, HTML and JSON."""
