"""The dashboard's pages, in navigation order (mechanism pages: ``mechanisms.PAGES``).

Each module has ``PAGE`` (path, name, title, order), ``layout()`` and ``register(app, ...)``;
``ccdiag.app.create_app`` registers them with ``dash.register_page``.
"""

from __future__ import annotations

from ccdiag.app.pages import export, overview, recommendations, timeline, traces, whatif

PAGE_MODULES = (overview, timeline, recommendations, export, traces, whatif)
