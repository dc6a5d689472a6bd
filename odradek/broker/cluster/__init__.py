"""Several brokers in one process: the layout (``layout.py``), its service (``service.py``) and the
leadership check around the handlers (``guard.py``)."""

from .layout import Layout, PartitionState, place
from .service import Cluster

__all__ = ["Cluster", "Layout", "PartitionState", "place"]
