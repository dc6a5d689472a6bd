"""The share coordinator: ``__share_group_state`` shards on the coordinator runtime (``shard.py``).

Not wired to any API yet; see docs/ARCHITECTURE.md, *Share groups*.
"""
