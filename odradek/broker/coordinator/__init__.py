"""The group coordinator: classic consumer groups and committed offsets, on ``__consumer_offsets``.

Sans-I/O: the wire glue (``broker/handlers/groups.py``, ``offsets.py``)
turns requests into the plain values of ``api.py`` and calls in; nothing
here touches a socket.  The topic is split into shards (``shard.py``), one
per partition, each writing through the coordinator runtime
(``broker/runtime/``).  Where things are:

- ``shards.py``: ``GroupShards`` -- the shards, group -> shard routing and
  the common checks every request passes: what the operations take.
- ``service.py``: the ``Coordinator`` the broker runs -- ``GroupShards`` plus
  loading, the expiry sweep, deleted topics and transaction markers.
- ``join.py`` (JoinGroup), ``membership.py`` (SyncGroup, Heartbeat,
  LeaveGroup), ``rebalance.py`` (join and sync phases, sessions, the group
  record), ``state.py`` (the group state table), ``group.py`` (the live
  group and member model).
- ``offsets.py`` (OffsetCommit, OffsetFetch, OffsetDelete, deleted topics),
  ``expiry.py`` (the KIP-211 sweep), ``admin.py`` (Describe/List/DeleteGroups).
- ``config.py``: its settings.
"""
