"""
The Arrow peer of `npm run bench`: the pipeline a data engineer would write
instead of Pulpitum's export. Binary COPY of one bucket through psycopg 3,
rows into pyarrow record batches, written as Parquet with ZSTD to a file.
Unverified: no read-back, no digest, no fencing. Python is a bench tool only.

    python bench/arrow_peer.py --check
    python bench/arrow_peer.py '{"databaseUrl": ..., "recordsTable": ..., "tableId": ..., "partitionKeyHex": ...,
                                 "bucketKey": ..., "outPath": ...}'

Prints one JSON line: rows, bytes, seconds (wall, the COPY and the write),
cpuSeconds (this process's user + system over the same span) and maxRssMb.
"""

import json
import os
import resource
import sys
import time

BATCH_ROWS = 65_536


def main() -> None:
    try:
        import psycopg
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:  # the bench prints this and skips the peer
        print(json.dumps({"missing": str(error)}))
        return
    if sys.argv[1] == "--check":
        print(json.dumps({"pyarrow": pa.__version__, "psycopg": psycopg.__version__}))
        return
    args = json.loads(sys.argv[1])
    schema = pa.schema(
        [
            pa.field("partition_key", pa.binary(), nullable=False),
            pa.field("event_time", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("sort_key", pa.binary(), nullable=False),
            pa.field("value", pa.binary(), nullable=False),
        ]
    )
    sql = (
        "COPY (SELECT partition_key, event_time, sort_key, value FROM " + args["recordsTable"] + ""
        " WHERE table_id = %s AND partition_key = %s AND bucket_key = %s"
        " ORDER BY event_time, sort_key) TO STDOUT (FORMAT BINARY)"
    )
    params = (args["tableId"], bytes.fromhex(args["partitionKeyHex"]), args["bucketKey"])
    with psycopg.connect(args["databaseUrl"], options="-c TimeZone=UTC") as conn:
        cpu0 = os.times()
        started = time.perf_counter()
        rows = 0
        with conn.cursor() as cur, pq.ParquetWriter(
            args["outPath"], schema, compression="zstd"
        ) as writer:
            with cur.copy(sql, params) as copy:
                copy.set_types(["bytea", "timestamptz", "bytea", "bytea"])
                columns = ([], [], [], [])

                def flush() -> None:
                    batch = pa.record_batch(
                        [pa.array(c, type=f.type) for c, f in zip(columns, schema)],
                        schema=schema,
                    )
                    writer.write_batch(batch)
                    for c in columns:
                        c.clear()

                for row in copy.rows():
                    for c, v in zip(columns, row):
                        c.append(v)
                    if len(columns[0]) == BATCH_ROWS:
                        rows += BATCH_ROWS
                        flush()
                if columns[0]:
                    rows += len(columns[0])
                    flush()
        seconds = time.perf_counter() - started
        cpu1 = os.times()
    print(
        json.dumps(
            {
                "rows": rows,
                "bytes": os.path.getsize(args["outPath"]),
                "seconds": seconds,
                "cpuSeconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
                "maxRssMb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "pyarrow": pa.__version__,
                "psycopg": psycopg.__version__,
            }
        )
    )
    os.remove(args["outPath"])


main()
