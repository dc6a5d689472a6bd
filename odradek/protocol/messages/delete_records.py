"""DeleteRecords (key 21): move partitions' log start offsets forward (admin ``delete_records``).

v1 = v0; v2 is flexible.  An offset of -1 means the high watermark.
"""

from ..schema import F, Message

REQUEST = Message("DeleteRecordsRequest", [
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("offset", "int64"),
        ]),
    ]),
    F("timeout_ms", "int32"),
], valid="0-2", flexible="2+")

RESPONSE = Message("DeleteRecordsResponse", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        ]),
    ]),
], valid="0-2", flexible="2+")
