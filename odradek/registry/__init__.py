"""The schema registry's domain, sans-I/O: Confluent Schema Registry's state as the ``_schemas`` log.

``records`` are the ``_schemas`` keys and values in Confluent's JSON; ``state`` replays them
into subjects, versions, ids, configs and modes; ``operations`` turn a request into the
records to write and the answer (touching no state: the state follows the records once they
are durable, as every other log here); ``schemas`` parses each schema type and
``compatibility`` holds Confluent's rules per type, pure functions.  The broker
(``broker/schema_registry.py``) drives it over the data plane; ``web/registry.py`` serves it.
"""
