"""The data plane: topics, produce, fetch (protocol-free state and storage access).

Request handlers live in ``broker/handlers/``; they translate the protocol
into calls on :class:`DataPlane` and its :class:`TopicRegistry`.
"""

from .service import AppendResult, DataPlane
from .topics import Topic, TopicError, TopicRegistry

__all__ = ["AppendResult", "DataPlane", "Topic", "TopicError", "TopicRegistry"]
