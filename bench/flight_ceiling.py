#!/usr/bin/env python3
"""What pyarrow.flight can do at all on this machine: a Flight server in pyarrow that solves
nothing, for bench/flight.py's `ceiling` path.

    bench/flight_ceiling.py [--echo]

It serves DoExchange on 127.0.0.1 (a free port, printed as `listening on ADDR`, as the
gamesolver server prints it) and answers each batch of Stone Game IV problems with a batch
of the answer's shape and bytes as gamesolver's door writes it (`game` "stone_game_iv" a
row, a dictionary key, `alice_wins`, `move_take` valid where Alice wins, the two error columns all null),
made once a batch length and sent again: so the transport alone, both ends pyarrow's C++.
With --echo it sends each problem batch back as it came (8 bytes a row, not ~17). It runs
until SIGTERM.
"""
import argparse

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

ANSWER_SCHEMA = pa.schema([
    ("game", pa.dictionary(pa.int8(), pa.string())),
    ("alice_wins", pa.bool_()),
    ("move_take", pa.uint64()),
    ("error_reason", pa.string()),
    ("error_message", pa.string()),
])


def answer(rows):
    """A batch of `rows` answers in the door's shape: Alice wins every third row."""
    wins = np.arange(rows) % 3 != 0
    labels = pa.array(["sum_game", "stone_game_ix", "stone_game_iv", "nim_square"])
    game = pa.DictionaryArray.from_arrays(pa.array(np.full(rows, 2, dtype=np.int8)), labels)
    nulls = pa.nulls(rows, pa.string())
    return pa.record_batch([
        game,
        pa.array(wins),
        pa.array(np.where(wins, 1, 0).astype(np.uint64), mask=~wins),
        nulls,
        nulls,
    ], schema=ANSWER_SCHEMA)


class CeilingServer(flight.FlightServerBase):
    def __init__(self, echo):
        super().__init__("grpc://127.0.0.1:0")
        self.echo = echo
        self.answers = {}

    def do_exchange(self, context, descriptor, reader, writer):
        started = False
        for chunk in reader:
            batch = chunk.data
            if batch is None:
                continue
            if not self.echo:
                rows = batch.num_rows
                if rows not in self.answers:
                    self.answers[rows] = answer(rows)
                batch = self.answers[rows]
            if not started:
                writer.begin(batch.schema)
                started = True
            writer.write_batch(batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--echo", action="store_true", help="send each problem batch back as it came")
    args = parser.parse_args()
    server = CeilingServer(args.echo)
    print(f"listening on 127.0.0.1:{server.port}", flush=True)
    # SIGTERM's default action ends it: there is nothing to save.
    server.serve()


if __name__ == "__main__":
    main()
