"""The web console: topics, messages, consumer groups and lag, the offsets timeline, schemas, test control.

Server-rendered pages (``routes.py``, Jinja2 templates under ``templates/``, the vendored htmx under
``static/`` for the live parts) on the broker's own event loop, served by the HTTP surfaces' one
stack (``web/http.py``, built on the first connection by ``web/deferred.py``).  The pages read and
change the broker the way a Kafka client would, through its handlers (``web/kafka_local.py``), and
what only the broker knows from its domain objects (``reads.py``).  ``odradek.console.listener``
turns it on (``odradek serve``: http://127.0.0.1:8080).
"""

from __future__ import annotations

from .routes import ConsolePages, ConsoleServices

__all__ = ["ConsolePages", "ConsoleServices"]
