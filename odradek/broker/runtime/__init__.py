"""The coordinator runtime: how a coordinator's records reach the log before its answers leave.

``runtime.py`` holds the mechanism (staging per event-loop turn, batching,
appending, waiting for fsync, failing a shard, replay, releasing held
answers); ``promise.py`` the ``Promise`` through which late answers travel.
Coordinators (``broker/coordinator/`` for groups and offsets) sit on it; see
docs/ARCHITECTURE.md for the contract and how to add one.
"""
