"""Columns of problems in, columns of answers out: the gamesolver's Arrow Flight door.

A table holds one input column a game, named as the proto names the game's field
(``num`` for Sum Game, ``n`` for Stone Game IV, and so on), and an optional ``id`` of any
type that comes back unchanged. The answer has the ``id``, ``game`` (the row's game,
``stone_game_iv``; null for a row with none or two), ``alice_wins``, the move's fields
(``move_index``, ``move_take``, ...), ``nim_value`` (Nim Square) and
``error_reason``/``error_message`` (null on rows that were solved). ``docs/api.md`` in the
repository has the schemas; :data:`GAMES` names the games, as the generated stubs do.

:func:`solve_batches` streams record batches through one ``DoExchange`` call, a few
batches ahead of their answers, and fails over to the next server when one stops
answering: the batches it had not answered are sent again, so every row is answered
exactly once, in order. Every answer is checked before it is handed back (its row count
and its echoed ids). :func:`solve_table` does the same for a whole table: a pyarrow
table, or a pandas or Polars DataFrame.

Numbers are read as their writers keep them, by the server's one rule: a float, decimal
or string column (pandas' ``float64`` with ``NaN``, Spark's ``decimal(20,0)``) is read
where its values are whole numbers from 0 to 2^64 - 1; ``NaN`` and null are no value,
and any other value is that row's error (``NOT_UINT64``, ``NEGATIVE_VALUE``).

Spark's ``DataFrame.mapInArrow`` and Ray Data's ``map_batches(batch_format="pyarrow")``
call it from each partition; ``examples/spark_job.py`` and ``examples/ray_job.py`` show
how, and ``docs/datasets.md`` how many servers a job wants.
"""
import logging
import math
import time
from collections import deque
from typing import Deque, Iterable, Iterator, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.flight as flight

from gamesolver.v1 import gamesolver_pb2

GAMES = tuple(field.name for field in gamesolver_pb2.Problem.DESCRIPTOR.oneofs_by_name["game"].fields) + ("mixed",)
"""What a descriptor may name: one game, or ``mixed`` (each row's game is its one
non-null input column)."""

ID = "id"
"""The column echoed from each problem to its answer. When the input has none, the helper
sends the row numbers as ``id``, so that every answer can be checked, and drops them from
the answer."""

_RETRYABLE = (
    flight.FlightUnavailableError,
    flight.FlightTimedOutError,
    flight.FlightInternalError,
    flight.FlightServerError,
    flight.FlightCancelledError,
    ConnectionError,
    OSError,
)


CONNECT_DEADLINE = 5.0
"""Seconds a server is tried before a first connection to it is made: the default of
``gamesolver-client``'s ``--connect-deadline``, so that a wrong address fails as fast here
as on the command line. ``retry_for`` applies once a server is reached."""


class GaveUp(RuntimeError):
    """Every server was given up on: never reached within ``connect_deadline``, or failing
    for longer than ``retry_for`` without answering."""


class WrongAnswer(RuntimeError):
    """A server answered a batch with the wrong rows: a server fault, retried elsewhere."""


def _location(server: str) -> str:
    """``host:port``, ``grpc://``/``http://`` (plaintext) or ``grpc+tls://``/``https://``."""
    for prefix, scheme in (("https://", "grpc+tls://"), ("http://", "grpc://")):
        if server.startswith(prefix):
            return scheme + server[len(prefix):]
    return server if "://" in server else "grpc://" + server


def _signed(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Unsigned answer columns as signed ones, and the ``game`` dictionary as text, for
    engines without unsigned or dictionary types (Spark)."""
    arrays, fields = [], []
    for field, array in zip(batch.schema, batch.columns):
        if pa.types.is_unsigned_integer(field.type):
            target = pa.int64() if field.type.bit_width == 64 else pa.int32()
            array, field = array.cast(target), pa.field(field.name, target, field.nullable)
        elif pa.types.is_dictionary(field.type):
            target = field.type.value_type
            array, field = array.cast(target), pa.field(field.name, target, field.nullable)
        arrays.append(array)
        fields.append(field)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


class _Exchange:
    """One ``DoExchange`` call to one server."""

    def __init__(self, server: str, descriptor: flight.FlightDescriptor, schema: pa.Schema,
                 options: dict, timeout: Optional[float], turns: "_Servers"):
        self.server = server
        self.client = flight.FlightClient(_location(server), **options)
        if not turns.is_reached(server):
            self._reach(turns)
        call = flight.FlightCallOptions(timeout=timeout)
        self.writer, self.reader = self.client.do_exchange(descriptor, options=call)
        self.writer.begin(schema)
        self.finished = False

    def _reach(self, turns: "_Servers") -> None:
        """A first call that needs nothing but a connection, bounded by what is left of the
        connect deadline: a server that answers it, even with an error, is reached; one
        that cannot be connected to raises, and counts against the deadline."""
        left = turns.connect_left(self.server)
        try:
            list(self.client.list_flights(options=flight.FlightCallOptions(timeout=left)))
        except (flight.FlightUnavailableError, flight.FlightTimedOutError, ConnectionError, OSError):
            self.client.close()
            raise
        except pa.ArrowException:
            pass  # an answer all the same (an error, or none implemented): the connection was made
        turns.reached(self.server)

    def send(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)

    def receive(self) -> pa.RecordBatch:
        chunk = self.reader.read_chunk()
        if chunk.data is None:
            raise WrongAnswer(f"{self.server} sent a message without rows")
        return chunk.data

    def finish(self) -> None:
        if not self.finished:
            self.writer.done_writing()
            self.finished = True

    def close(self) -> None:
        for close in (self.writer.close, self.client.close):
            try:
                close()
            except Exception:  # noqa: BLE001 - a broken call is closed on a best-effort basis
                pass


def _check(sent: pa.RecordBatch, answer: pa.RecordBatch, server: str) -> None:
    """Refuses an answer that does not answer ``sent``, row for row."""
    if answer.num_rows != sent.num_rows:
        raise WrongAnswer(f"{server} answered {answer.num_rows} rows to a batch of {sent.num_rows}")
    if ID not in answer.schema.names or not answer.column(ID).equals(sent.column(ID)):
        raise WrongAnswer(f"{server} answered with other ids than it was sent")


class _Servers:
    """The servers still tried, whose turn it is, and how long the failures have lasted:
    for a server never reached, since its first try (given up on after
    ``connect_deadline``); for the others, in a row without an answer (``retry_for``)."""

    def __init__(self, servers: Sequence[str], retry_for: float, connect_deadline: Optional[float]):
        self.alive = list(servers)
        self.turn = 0
        self.retry_for = retry_for
        self.connect_deadline = retry_for if connect_deadline is None else connect_deadline
        self.failing_since: Optional[float] = None
        self.failures = 0
        self.first_try: dict = {}
        self.reached_servers: set = set()
        self.unreached: dict = {}

    def current(self) -> str:
        # A server never reached is given up on as soon as its deadline has passed.
        now = time.monotonic()
        self.alive = [server for server in self.alive if self._connect_deadline(server) > now]
        if not self.alive:
            if self.unreached and not self.reached_servers:
                why = "; ".join(f"{server}: {err}" for server, err in self.unreached.items())
                raise GaveUp(f"cannot reach any server within {self.connect_deadline} s (connect_deadline): {why}")
            raise GaveUp(f"every server failed for {self.retry_for} s without answering")
        return self.alive[self.turn % len(self.alive)]

    def _connect_deadline(self, server: str) -> float:
        """When ``server`` is given up on unless reached (never, once it has been)."""
        if server in self.reached_servers or server not in self.unreached:
            return math.inf
        return self.first_try[server] + self.connect_deadline

    def is_reached(self, server: str) -> bool:
        return server in self.reached_servers

    def reached(self, server: str) -> None:
        self.reached_servers.add(server)
        self.unreached.pop(server, None)

    def connect_left(self, server: str) -> float:
        """Seconds left to reach ``server`` (its deadline runs from its first try)."""
        first = self.first_try.setdefault(server, time.monotonic())
        return max(0.05, self.connect_deadline - (time.monotonic() - first))

    def answered(self) -> None:
        self.failing_since = None
        self.failures = 0

    def failed(self, server: str, err: Exception) -> None:
        """Moves on to the next server, after a pause that grows with the failures in a
        row; gives up on ``server`` once it has not been reached within
        ``connect_deadline``, or once failures have lasted ``retry_for``."""
        now = time.monotonic()
        self.failing_since = self.failing_since or now
        self.failures += 1
        if server not in self.reached_servers:
            self.unreached[server] = err
            self.first_try.setdefault(server, now)
        elif now - self.failing_since >= self.retry_for and server in self.alive:
            self.alive.remove(server)
            self.failing_since = now if self.alive else None
        self.turn += 1
        # The pause ends early at the next connect deadline, which current() then applies.
        deadline = min((self._connect_deadline(server) for server in self.alive), default=math.inf)
        time.sleep(max(0.0, min(2.0, 0.05 * 2 ** min(self.failures, 6), deadline - now)))


def solve_batches(
    batches: Iterable[pa.RecordBatch],
    servers: Union[str, Sequence[str]],
    game: str = "mixed",
    *,
    winner_only: bool = False,
    window: int = 4,
    batch_rows: int = 65536,
    retry_for: float = 60.0,
    connect_deadline: Optional[float] = CONNECT_DEADLINE,
    timeout: Optional[float] = None,
    signed: bool = False,
    tls_root_certs: Optional[bytes] = None,
    cert_chain: Optional[bytes] = None,
    private_key: Optional[bytes] = None,
) -> Iterator[pa.RecordBatch]:
    """Answers each record batch, in order: one answer batch per input slice of at most
    ``batch_rows`` rows.

    ``servers`` are tried in turn, starting with the first: give each partition of a job
    a different first server to spread the load. A server that fails (or answers wrongly)
    hands its unanswered batches to the next; once failures have lasted ``retry_for``
    seconds without an answer, the failing server is given up on, and :class:`GaveUp` is
    raised when none is left. A server not yet reached (refused, no route, DNS, TLS) is
    given up on after ``connect_deadline`` seconds from its first try (default
    :data:`CONNECT_DEADLINE`, 5 s, as ``gamesolver-client --connect-deadline``; ``None``:
    ``retry_for``). ``timeout`` bounds each call, in seconds. ``signed`` casts
    unsigned answer columns to signed ones and the ``game`` dictionary to text (Spark has
    neither unsigned nor dictionary types).
    ``tls_root_certs``, ``cert_chain`` and ``private_key`` are PEM bytes for ``https://``
    servers (a private CA; mutual TLS).
    """
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}: expected one of {', '.join(GAMES)}")
    servers = [servers] if isinstance(servers, str) else list(servers)
    if not servers:
        raise ValueError("no server to send the problems to")
    path = [game, "winner_only"] if winner_only else [game]
    descriptor = flight.FlightDescriptor.for_path(*path)
    options = {key: value for key, value in (("tls_root_certs", tls_root_certs), ("cert_chain", cert_chain),
                                             ("private_key", private_key)) if value is not None}
    source = _slices(batches, max(1, batch_rows))
    turns = _Servers(servers, retry_for, connect_deadline)
    pending: Deque[Tuple[pa.RecordBatch, bool]] = deque()
    exhausted = False
    exchange: Optional[_Exchange] = None
    while True:
        if not pending and not exhausted:
            item = next(source, None)
            if item is None:
                exhausted = True
            else:
                pending.append(item)
        if not pending:
            if exchange is not None:
                exchange.close()
            return
        server = turns.current()
        try:
            if exchange is None:
                exchange = _Exchange(server, descriptor, pending[0][0].schema, options, timeout, turns)
                for batch, _ in pending:
                    exchange.send(batch)
            while not exhausted and len(pending) < max(1, window):
                item = next(source, None)
                if item is None:
                    exhausted = True
                else:
                    # Pending before it is sent: a send that fails must not lose it.
                    pending.append(item)
                    exchange.send(item[0])
            if exhausted:
                exchange.finish()
            sent, numbered = pending[0]
            answer = exchange.receive()
            _check(sent, answer, server)
        except (*_RETRYABLE, WrongAnswer) as err:
            if exchange is not None:
                exchange.close()
            exchange = None
            _warn(server, err, len(pending))
            turns.failed(server, err)
            continue
        pending.popleft()
        turns.answered()
        if numbered:
            answer = answer.drop_columns([ID])
        yield _signed(answer) if signed else answer


def _slices(batches: Iterable[pa.RecordBatch], batch_rows: int) -> Iterator[Tuple[pa.RecordBatch, bool]]:
    """Each batch in slices of at most ``batch_rows`` rows (an empty batch as itself), with
    the row numbers as ``id`` when it has none; the flag says whether they were added."""
    row = 0
    for batch in batches:
        numbered = ID not in batch.schema.names
        if numbered:
            batch = batch.append_column(ID, pa.array(range(row, row + batch.num_rows), type=pa.uint64()))
        row += batch.num_rows
        if batch.num_rows == 0:
            yield batch, numbered
        for start in range(0, batch.num_rows, batch_rows):
            yield batch.slice(start, batch_rows), numbered


def _warn(server: str, err: Exception, pending: int) -> None:
    logging.getLogger(__name__).warning(
        "gamesolver server %s failed (%s); its %d unanswered batches are sent again", server, err, pending)


Table = Union[pa.Table, pa.RecordBatch, "pandas.DataFrame", "polars.DataFrame"]  # noqa: F821


def _as_arrow(table: Table) -> pa.Table:
    """``table`` as a pyarrow table: a Polars frame's own Arrow columns (no copy for most
    types), a pandas frame converted by pyarrow (numeric columns without a copy where
    their memory allows; ``NaN`` in a float column becomes null), without its index."""
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    library = type(table).__module__.split(".")[0]
    if library == "polars":
        return table.to_arrow()
    if library == "pandas":
        return pa.Table.from_pandas(table, preserve_index=False)
    raise TypeError(f"cannot solve a {type(table).__module__}.{type(table).__name__}: "
                    "give a pyarrow Table, a pandas DataFrame or a Polars DataFrame")


def solve_table(table: Table, servers: Union[str, Sequence[str]], game: str = "mixed",
                **options) -> pa.Table:
    """Answers every row of ``table`` (a pyarrow Table or RecordBatch, a pandas DataFrame or
    a Polars DataFrame), in order; see :func:`solve_batches` for the options. The answer is
    a pyarrow table (``.to_pandas()``, ``polars.from_arrow(...)``). An empty table gets an
    empty answer with the answer's schema."""
    table = _as_arrow(table)
    batches = table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]
    return pa.Table.from_batches(list(solve_batches(batches, servers, game, **options)))
