#!/usr/bin/env python3
"""Heavy recompression in the Produce worker thread: the check's decompressed area reused.

Why: a heavy batch for a topic whose ``compression.type`` differs from the
producer's codec is checked and recompressed in a worker thread
(``batches.precheck``).  The check decompresses the records area; the
recompression used to decompress it again.  Both paths run here side by side
in one run on the same batches (a zstd batch of ``--records`` records of
~100 bytes, stored as gzip and as lz4): "twice" decompresses for the check
and again for ``recompress``, "once" hands the check's area over.  Times are
CPU time of this process (best of ``--repeat``, interleaved), so the ratio is
what to compare across machines.

    PYTHONPATH=. /work/venv/bin/python scripts/bench_recompress.py [--records 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

from odradek.broker.dataplane.batches import check_records, check_records_area
from odradek.broker.dataplane.recompress import recompress
from odradek.protocol.compression import GZIP, LZ4, ZSTD
from odradek.protocol.records import encode_batch, read_batch_header


def heavy_batch(n: int) -> bytes:
    return encode_batch([(b"key-%08d" % i, b"value %08d " % i + b"x" * (i % 80)) for i in range(n)],
                        compression=ZSTD)


def twice(data: bytes, codec: int) -> bytes:
    h = read_batch_header(data, 0)
    check_records(data, h)
    return recompress(data, codec)[0]


def once(data: bytes, codec: int) -> bytes:
    h = read_batch_header(data, 0)
    _records, area = check_records_area(data, h)
    return recompress(data, codec, None, area)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    data = heavy_batch(args.records)
    print(f"zstd batch: {args.records} records, {len(data)} bytes")
    for name, codec in (("gzip", GZIP), ("lz4", LZ4)):
        assert once(data, codec) == twice(data, codec)
        best = {"twice": float("inf"), "once": float("inf")}
        for _ in range(args.repeat):
            for label, fn in (("twice", twice), ("once", once)):
                started = time.process_time()
                fn(data, codec)
                best[label] = min(best[label], time.process_time() - started)
        print(f"zstd -> {name}: twice {best['twice'] * 1000:.1f} ms, once {best['once'] * 1000:.1f} ms, "
              f"once/twice {best['once'] / best['twice']:.3f}")


if __name__ == "__main__":
    main()
