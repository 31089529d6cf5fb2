#!/usr/bin/env python3
"""Cross-check the Arrow Flight door from pyarrow.flight (Arrow's C++ Flight client), the
client columnar users have:

- ListFlights names the five descriptors, and GetFlightInfo's app_metadata reads back as
  the output schema with pyarrow.ipc;
- the problems of a JSON lines file, as one table a game and one `mixed` table, go through
  DoExchange in batches (pyarrow's framing: the descriptor alone first), and every row must
  equal what SolveBatch answers to the same problem through grpcio: the winner, the move,
  the nim value, the error's reason and message;
- a null and a negative input are their rows' NULL_INPUT and NEGATIVE_VALUE.

Usage: flight_pyarrow.py SERVER_BIN PROBLEMS.jsonl  (needs pyarrow and the package
installed: pip install pyarrow ./clients/python)
"""
import select
import subprocess
import sys

import grpc
import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import json_format

from gamesolver.v1 import gamesolver_pb2 as pb2, gamesolver_pb2_grpc as pb2_grpc

GAMES = ["sum_game", "stone_game_ix", "stone_game_iv", "nim_square"]
INPUT = {"sum_game": "num", "stone_game_ix": "stones", "stone_game_iv": "n", "nim_square": "piles"}
TYPE = {"num": pa.string(), "stones": pa.list_(pa.uint64()), "n": pa.uint64(), "piles": pa.list_(pa.uint64())}


def cell(problem, game):
    """The problem's input for `game`'s column, or None."""
    if problem.WhichOneof("game") != game:
        return None
    value = getattr(getattr(problem, game), INPUT[game])
    return value if isinstance(value, (str, int)) else list(value)


def row(solution):
    """A wire solution as the row of solutions the Flight door writes."""
    if solution.HasField("error"):
        return {"alice_wins": None, "move": None, "nim_value": None,
                "error": (solution.error.reason, solution.error.message)}
    which = solution.winning_move.WhichOneof("game") if solution.HasField("winning_move") else None
    move = None
    if which == "sum_game":
        move = {"move_index": solution.winning_move.sum_game.index, "move_digit": solution.winning_move.sum_game.digit}
    elif which == "stone_game_ix":
        move = {"move_index": solution.winning_move.stone_game_ix.index}
    elif which == "stone_game_iv":
        move = {"move_take": solution.winning_move.stone_game_iv.take}
    elif which == "nim_square":
        m = solution.winning_move.nim_square
        move = {"move_pile": m.pile, "move_take": m.take}
    nim_value = solution.nim_value if solution.HasField("nim_value") else None
    return {"alice_wins": solution.alice_wins, "move": move, "nim_value": nim_value, "error": None}


def flight_rows(table):
    """The rows of a table of solutions, in the form `row` writes."""
    columns = table.to_pydict()
    moves = [c for c in ("move_index", "move_digit", "move_pile", "move_take") if c in columns]
    rows = []
    for i in range(table.num_rows):
        move = {c: columns[c][i] for c in moves if columns[c][i] is not None} or None
        reason = columns["error_reason"][i]
        rows.append({"alice_wins": columns["alice_wins"][i], "move": move,
                     "nim_value": columns.get("nim_value", [None] * table.num_rows)[i],
                     "error": None if reason is None else (reason, columns["error_message"][i])})
    return rows


def exchange(client, path, table, batch_rows):
    """The answers to `table`, sent in batches of `batch_rows`: one answer a batch."""
    writer, reader = client.do_exchange(flight.FlightDescriptor.for_path(*path))
    writer.begin(table.schema)
    answers = []
    for batch in table.to_batches(max_chunksize=batch_rows):
        writer.write_batch(batch)
        answer = reader.read_chunk().data
        if answer.num_rows != batch.num_rows or answer.column("id") != batch.column("id"):
            sys.exit(f"flight_pyarrow: {path}: a batch of {batch.num_rows} rows got {answer.num_rows}")
        answers.append(answer)
    writer.done_writing()
    return pa.Table.from_batches(answers)


def main():
    server_bin, problems_path = sys.argv[1:3]
    problems = []
    with open(problems_path) as f:
        for line in f:
            problem = pb2.Problem()
            try:
                json_format.Parse(line, problem)
            except json_format.ParseError:
                continue
            problems.append(problem)

    server = subprocess.Popen([server_bin, "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if not select.select([server.stdout], [], [], 30)[0]:
            sys.exit("flight_pyarrow: the server printed no address within 30 s")
        addr = server.stdout.readline().strip().removeprefix("listening on ")
        client = flight.connect(f"grpc://{addr}")
        paths = [info.descriptor.path for info in client.list_flights()]
        if paths != [[g.encode()] for g in GAMES + ["mixed"]]:
            sys.exit(f"flight_pyarrow: ListFlights named {paths}")
        info = client.get_flight_info(flight.FlightDescriptor.for_path("nim_square"))
        output = pa.ipc.read_schema(pa.py_buffer(info.app_metadata))
        if output.names != ["id", "game", "alice_wins", "move_pile", "move_take", "nim_value", "error_reason", "error_message"]:
            sys.exit(f"flight_pyarrow: the output schema reads as {output}")

        with grpc.insecure_channel(addr) as channel:
            stub = pb2_grpc.GameSolverServiceStub(channel)
            expected = [row(s) for s in stub.SolveBatch(pb2.SolveBatchRequest(problems=problems), timeout=120).solutions]
            checked = 0
            for game in GAMES:
                rows = [(i, p) for i, p in enumerate(problems) if p.WhichOneof("game") == game]
                if not rows:
                    continue
                column = INPUT[game]
                table = pa.table({"id": pa.array([i for i, _ in rows], pa.int64()),
                                  column: pa.array([cell(p, game) for _, p in rows], TYPE[column])})
                got = flight_rows(exchange(client, [game], table, 97))
                want = [expected[i] for i, _ in rows]
                if got != want:
                    bad = next(k for k in range(len(got)) if got[k] != want[k])
                    sys.exit(f"flight_pyarrow: {game} row {bad}: Flight {got[bad]}, SolveBatch {want[bad]}")
                checked += len(rows)
            mixed = pa.table({"id": pa.array(range(len(problems)), pa.int64()),
                              **{INPUT[g]: pa.array([cell(p, g) for p in problems], TYPE[INPUT[g]]) for g in GAMES}})
            got = flight_rows(exchange(client, ["mixed"], mixed, 500))
            if got != expected:
                bad = next(k for k in range(len(got)) if got[k] != expected[k])
                sys.exit(f"flight_pyarrow: mixed row {bad}: Flight {got[bad]}, SolveBatch {expected[bad]}")

        odd = pa.table({"id": ["null", "negative"], "n": pa.array([None, -1], pa.int64())})
        errors = exchange(client, ["stone_game_iv"], odd, 2).to_pydict()
        want = [("NULL_INPUT", "stone game iv: n is null"), ("NEGATIVE_VALUE", "stone game iv: n = -1 is negative")]
        if list(zip(errors["error_reason"], errors["error_message"])) != want:
            sys.exit(f"flight_pyarrow: the row errors read {errors}")
        print(f"flight_pyarrow: {checked} problems by game and {len(problems)} mixed agree with SolveBatch")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
