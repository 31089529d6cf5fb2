"""Soak test of gamesolver-server's bounds; run by bench/soak.sh (which builds the server
and the venv). Replays the hostile probes of the hardening issues (the Arrow Flight door's IPC
messages among them) against a release server on loopback, then a mixed load with clients killed at random, checking every answer and
the server's RSS. Exits 1 when a bound is exceeded or an answer is wrong."""

import os
import random
import resource
import signal
import socket
import sys
import threading
import time
import urllib.parse
import zlib

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions

from server_process import ServerProcess

SERVER = sys.argv[1]
WORK = sys.argv[2]
# --short (.ci/soak.sh): every probe and every check, with the two timed phases cut so
# that the whole run takes about 90 s instead of about 3 minutes.
SHORT = "--short" in sys.argv[3:]
RAPID_RESET_SECONDS = 5 if SHORT else 10
MIXED_LOAD_SECONDS = 15 if SHORT else 30
FLAGS = ["--handshake-timeout", "2", "--connection-idle-timeout", "5", "--stream-idle-timeout", "3",
         "--iv-precompute", "100000"]
SERVICE = "/gamesolver.v1.GameSolverService/"
MIB = 1 << 20
failures = []
passes = []


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
    (passes if ok else failures).append(what)


# --- protobuf and gRPC framing, by hand: the probes need raw bytes anyway ---------------

def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(tag, payload):
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def sum_problem(pid, num):
    return field(1, pid.encode()) + field(2, field(1, num.encode()))


def iv_problem(pid, n):
    return field(1, pid.encode()) + field(4, varint(1 << 3) + varint(n))


def grpc_frame(message, compressed=False):
    return bytes([1 if compressed else 0]) + len(message).to_bytes(4, "big") + message


def solve_request_prefix(pid, num_len):
    """SolveRequest{problem{id, sum_game{num}}} up to the num's bytes."""
    sum_game_len = 1 + len(varint(num_len)) + num_len
    problem = field(1, pid.encode()) + varint(2 << 3 | 2) + varint(sum_game_len) + varint(1 << 3 | 2) + varint(num_len)
    problem_len = len(problem) + num_len
    return varint(1 << 3 | 2) + varint(problem_len) + problem


def gzip_of_ones(pid, num_len, path):
    """A gzip'd SolveRequest whose Sum Game is num_len '1's, built in chunks, cached."""
    return compressed_ones(pid, num_len, path, zlib.compressobj(9, zlib.DEFLATED, 31))


def zstd_of_ones(pid, num_len, path):
    """The same request compressed with zstd (level 19, whose window the server accepts)."""
    import zstandard
    return compressed_ones(pid, num_len, path, zstandard.ZstdCompressor(level=19).compressobj())


def compressed_ones(pid, num_len, path, z):
    """A SolveRequest whose Sum Game is num_len '1's, through the compressor `z` in
    chunks, cached in `path`."""
    if os.path.exists(path):
        return open(path, "rb").read()
    parts = [z.compress(solve_request_prefix(pid, num_len))]
    chunk = b"1" * MIB
    left = num_len
    while left:
        take = min(left, len(chunk))
        parts.append(z.compress(chunk[:take]))
        left -= take
    parts.append(z.flush())
    data = b"".join(parts)
    open(path, "wb").write(data)
    return data


# --- the server under test --------------------------------------------------------------

class Server(ServerProcess):
    """The release server with the soak's flags (and `extra`)."""

    def __init__(self, extra=(), preexec=None):
        super().__init__([SERVER, "--listen", "127.0.0.1:0", *FLAGS, *extra],
                         os.path.join(WORK, f"server-{time.time_ns()}.log"), preexec=preexec)
        time.sleep(0.5)


def health(server, timeout=20.0):
    """A bystander's health check: seconds it took, or None when it failed."""
    start = time.monotonic()
    try:
        with grpc.insecure_channel(server.addr) as channel:
            check_call = channel.unary_unary("/grpc.health.v1.Health/Check")
            check_call(b"", timeout=timeout)
        return time.monotonic() - start
    except grpc.RpcError:
        return None


def wait_closed(sockets, seconds):
    """How many of `sockets` the server closed within `seconds`."""
    deadline = time.monotonic() + seconds
    closed = set()
    while time.monotonic() < deadline and len(closed) < len(sockets):
        for i, s in enumerate(sockets):
            if i in closed:
                continue
            try:
                s.setblocking(False)
                if s.recv(65536) == b"":
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
        time.sleep(0.05)
    return len(closed)


class H2:
    """A raw HTTP/2 connection for probes that grpcio cannot make."""

    def __init__(self, server):
        self.sock = socket.create_connection((server.host, server.port))
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.responses = {}

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def open_call(self, method, compressed=False, encoding="gzip", path=None):
        sid = self.conn.get_next_available_stream_id()
        path = path or SERVICE + method
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x"),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        if compressed:
            headers.append(("grpc-encoding", encoding))
        self.conn.send_headers(sid, headers)
        return sid

    def ended(self, sid):
        """True once the call has its status, or its stream was reset."""
        response = self.responses.get(sid, {})
        return "grpc-status" in response or "reset" in response

    def send(self, sid, data, end=True):
        """Sends `data`; False when the call ended first (the rest is not sent: the server
        reads no more of it, so its flow-control window would never open)."""
        view = memoryview(data)
        while view:
            if self.ended(sid):
                return False
            window = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if window <= 0:
                if not self.pump(1.0):
                    return False
                continue
            self.conn.send_data(sid, view[:window].tobytes())
            view = view[window:]
            self.flush()
        if end:
            self.conn.end_stream(sid)
        self.flush()
        return True

    def pump(self, seconds):
        """Reads events for up to `seconds`; False once the server closed."""
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return True
        except OSError:
            return False
        if not data:
            return False
        try:
            return self.receive(data)
        except OSError:
            return False

    def receive(self, data):
        for event in self.conn.receive_data(data):
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                headers = {k: urllib.parse.unquote(v) for k, v in event.headers}
                self.responses.setdefault(event.stream_id, {}).update(headers)
            elif isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                self.responses.setdefault(event.stream_id, {})["data"] = True
            elif isinstance(event, h2.events.StreamReset):
                self.responses.setdefault(event.stream_id, {})["reset"] = event.error_code
        self.flush()
        return True

    def wait_statuses(self, sids, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all("grpc-status" in self.responses.get(s, {}) or "reset" in self.responses.get(s, {}) for s in sids):
                break
            if not self.pump(0.2):
                break
        return {s: self.responses.get(s, {}) for s in sids}


def report(name, server, before):
    after = server.rss()
    print(f"  rss   {name}: before {before / MIB:.0f} MB, peak {server.hwm() / MIB:.0f} MB, after {after / MIB:.0f} MB",
          flush=True)
    return after


# --- the probes -----------------------------------------------------------------------

def probe_idle_connections(server):
    print("5,000 TCP connections that never send the HTTP/2 preface", flush=True)
    server.reset_peak()
    before = server.rss()
    # One client (127.0.0.2) opens them all: alone, it may hold every connection
    # (--max-connections, 4,096), and the rest are closed at once. The bystander is another
    # client (127.0.0.1), within its fair share, for which one of them makes way; one from
    # the attacker's own address would be refused with them, by design.
    sockets = [socket.create_connection((server.host, server.port), timeout=10, source_address=("127.0.0.2", 0))
               for _ in range(5000)]
    took = health(server)
    check(took is not None, f"a bystander's health check is answered ({took and round(took, 2)} s)")
    closed = wait_closed(sockets, 20)
    check(closed == len(sockets), f"the server closed {closed} of {len(sockets)} after the handshake timeout")
    for s in sockets:
        s.close()
    time.sleep(2)
    report("idle connections", server, before)


def probe_ping_only(server):
    print("200 connections that only answer PINGs", flush=True)
    conns = [H2(server) for _ in range(200)]
    deadline = time.monotonic() + 20
    alive = set(range(len(conns)))
    while alive and time.monotonic() < deadline:
        for i in list(alive):
            try:
                conns[i].conn.ping(b"12345678")
                conns[i].flush()
                if not conns[i].pump(0.001):
                    alive.discard(i)
            except (OSError, h2.exceptions.ProtocolError):
                alive.discard(i)  # closed, or a GOAWAY received
        time.sleep(0.3)
    check(not alive, f"all closed by the idle-connection timeout ({len(alive)} still open)")
    for c in conns:
        c.sock.close()


def probe_silent_streams(server):
    print("10 connections x 1,100 SolveStream calls opened, no data sent", flush=True)
    server.reset_peak()
    before = server.rss()
    # Each connection is opened just before its calls, or the idle timeout would close it.
    conns, opened, refused_by_h2 = [], [], 0
    for _ in range(10):
        c = H2(server)
        conns.append(c)
        c.pump(0.2)
        sids = []
        for _ in range(1100):
            try:
                sids.append(c.open_call("SolveStream"))
            except h2.exceptions.TooManyStreamsError:
                refused_by_h2 += 1
        c.flush()
        opened.append(sids)
    results = [c.wait_statuses(sids, 20) for c, sids in zip(conns, opened)]
    codes = {}
    for result in results:
        for r in result.values():
            key = (r.get("grpc-status"), r.get("grpc-message", "")[:40]) if "grpc-status" in r else ("reset", str(r.get("reset")))
            codes[key] = codes.get(key, 0) + 1
    for key, count in sorted(codes.items(), key=str):
        print(f"        {count:6} x {key}")
    total = sum(len(s) for s in opened)
    ended = sum(codes.values())
    idle = sum(n for (code, _), n in codes.items() if code == "4")
    # Refused at the server's limit or at this client's share of it (one address here).
    shed = sum(n for (code, msg), n in codes.items()
               if code == "8" and msg.startswith(("server overloaded", "too many calls in flight from this clien")))
    check(ended == total, f"every one of the {total} calls opened has ended ({ended}); {refused_by_h2} held back by MAX_CONCURRENT_STREAMS")
    # HTTP/2 itself refuses a stream opened while the server still counts 1,024 (REFUSED_STREAM).
    refused = sum(n for (code, reason), n in codes.items() if code == "reset" and reason in ("7", "ErrorCodes.REFUSED_STREAM"))
    check(idle + shed + refused == total,
          f"{idle} ended DEADLINE_EXCEEDED (stream idle), {shed} refused RESOURCE_EXHAUSTED (max calls, server or client), "
          f"{refused} REFUSED_STREAM")
    for c in conns:
        c.sock.close()
    report("silent streams", server, before)


def probe_fd_exhaustion():
    print("a low open-file limit: server under a hard limit of 256, 300 connections from one client", flush=True)
    server = Server(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    try:
        # The server fits --max-connections under the limit (171 here), so the client's
        # connections beyond it are closed at once instead of exhausting the descriptors.
        # They send the HTTP/2 preface, so that the handshake timeout does not close them.
        sockets = []
        for _ in range(300):
            s = socket.create_connection((server.host, server.port), source_address=("127.0.0.2", 0))
            try:
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            except OSError:
                pass  # closed at once: beyond the bound
            sockets.append(s)
        took = health(server)
        check(took is not None, f"a bystander's health check is answered while they are held ({took and round(took, 3)} s)")
        cpu = server.cpu_seconds()
        time.sleep(3)
        used = server.cpu_seconds() - cpu
        check(used < 0.5, f"the accept loop does not spin: {used:.2f} s of CPU in 3 s")
        log = server.log_text()
        check("--max-connections lowered to fit the open-file limit" in log, "the bound lowered, with a warning")
        check("accept failed" not in log, "accept never ran out of descriptors")
        for s in sockets:
            s.close()
    finally:
        server.stop()


def probe_gzip_bomb(server):
    print("1 MB gzip request that inflates to 1 GiB", flush=True)
    server.reset_peak()
    before = server.rss()
    bomb = gzip_of_ones("bomb", 1 << 30, os.path.join(WORK, "bomb-1g.gz"))
    print(f"        compressed size {len(bomb) / MIB:.2f} MB", flush=True)
    c = H2(server)
    sid = c.open_call("Solve", compressed=True)
    c.send(sid, grpc_frame(bomb, compressed=True))
    r = c.wait_statuses([sid], 30)[sid]
    check(r.get("grpc-status") == "8" and "inflates to more than the limit" in r.get("grpc-message", ""),
          f"refused RESOURCE_EXHAUSTED: {r.get('grpc-message')}")
    c.sock.close()
    time.sleep(3)
    after = report("gzip bomb", server, before)
    check(server.hwm() - before < 256 * MIB, "peak stays within the request-byte budget (256 MiB)")
    check(after - before < 32 * MIB, "memory comes back after the bomb")


def probe_parallel_inflation(server, encoding):
    print(f"48 {encoding} requests that each inflate to 60 MB, in parallel", flush=True)
    server.reset_peak()
    before = server.rss()
    make = {"gzip": gzip_of_ones, "zstd": zstd_of_ones}[encoding]
    body = make("big", 60_000_000, os.path.join(WORK, f"ones-60m.{encoding}"))
    print(f"        compressed size {len(body) / 1024:.0f} KB", flush=True)
    results = []

    def call():
        c = H2(server)
        sid = c.open_call("Solve", compressed=True, encoding=encoding)
        c.send(sid, grpc_frame(body, compressed=True))
        results.append(c.wait_statuses([sid], 60)[sid])
        c.sock.close()

    callers = [threading.Thread(target=call) for _ in range(48)]
    for t in callers:
        t.start()
    time.sleep(0.2)
    bystander = [health(server)]
    for t in callers:
        t.join()
    ok = sum(1 for r in results if r.get("grpc-status") == "0" and r.get("data"))
    # Refused while the budget is in use, or past what one client (one address here) may hold.
    refusals = ("retry later", "request memory one client may hold")
    shed = sum(1 for r in results
               if r.get("grpc-status") == "8" and any(m in r.get("grpc-message", "") for m in refusals))
    check(ok + shed == 48, f"{ok} answered, {shed} refused RESOURCE_EXHAUSTED (budget in use or the client's share); nothing else")
    check(bystander[0] is not None, f"a bystander's health check took {bystander[0] and round(bystander[0], 3)} s")
    time.sleep(3)
    report(f"parallel {encoding} inflation", server, before)
    check(server.hwm() - before < 400 * MIB, "peak stays near the request-byte budget")


def probe_small_stones(server):
    print("4 Stone Game IX requests of 66 million stones below 128 (66 MB each, 528 MB decoded), in parallel",
          flush=True)
    server.reset_peak()
    before = server.rss()
    message = field(1, field(1, b"ix") + field(3, field(1, b"\x01" * 66_000_000)))
    results = []

    def call():
        c = H2(server)
        sid = c.open_call("Solve")
        c.send(sid, grpc_frame(message))
        results.append(c.wait_statuses([sid], 120)[sid])
        c.sock.close()

    callers = [threading.Thread(target=call) for _ in range(4)]
    for t in callers:
        t.start()
    time.sleep(0.2)
    bystander = health(server)
    for t in callers:
        t.join()
    refused = sum(1 for r in results
                  if r.get("grpc-status") == "8" and "request message decodes to" in r.get("grpc-message", ""))
    check(refused == 4, f"{refused} of 4 refused RESOURCE_EXHAUSTED before decoding, for what they decode to: "
                        f"{sorted({r.get('grpc-message') for r in results})}")
    check(bystander is not None, f"a bystander's health check took {bystander and round(bystander, 3)} s")
    time.sleep(3)
    report("small stones", server, before)
    check(server.hwm() - before < 256 * MIB, "peak stays within the request-byte budget (256 MiB)")


# --- Arrow Flight: IPC messages by hand ----------------------------------------------------

DO_EXCHANGE = "/arrow.flight.protocol.FlightService/DoExchange"
# The attacks' IPC messages, as fuzz/examples/seed_corpus.rs writes them for the columnar
# fuzz target: a selector byte, then each header and body after a little-endian u32 length.
ATTACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "columnar")


def ipc_messages(name):
    """The (header, body) pairs of the committed attack `name`."""
    data = open(os.path.join(ATTACKS, "attack-" + name), "rb").read()[1:]
    pieces = []
    while data:
        n = int.from_bytes(data[:4], "little")
        pieces.append(data[4:4 + n])
        data = data[4 + n:]
    return list(zip(pieces[0::2], pieces[1::2]))


def flight_data(header, body, path=None):
    """A FlightData message: the descriptor (a path) on the first, the IPC header and body."""
    out = b""
    if path is not None:
        out += field(1, varint(1 << 3) + varint(1) + b"".join(field(3, p.encode()) for p in path))
    out += field(2, header)
    if body:
        out += varint(1000 << 3 | 2) + varint(len(body)) + body
    return out


def patched(data, old, new):
    """`data` with its one occurrence of `old` (a little-endian i64 pair or i64) made `new`."""
    assert data.count(old) == 1, f"{old.hex()} occurs {data.count(old)} times"
    return data.replace(old, new)


def i64s(*values):
    return b"".join(v.to_bytes(8, "little", signed=True) for v in values)


def zstd_bomb():
    """The zstd-claim attack with a real body: 1 GiB of zero values, zstd-compressed to about
    33 KB, its buffer and body lengths patched to fit."""
    import zstandard
    (schema, _), (header, _) = ipc_messages("zstd-claim")
    z = zstandard.ZstdCompressor(level=19).compressobj()
    chunk = bytes(MIB)
    frame = b"".join([z.compress(chunk) for _ in range(1024)] + [z.flush()])
    body = (1 << 30).to_bytes(8, "little") + frame
    body += bytes(-len(body) % 8)
    header = patched(header, i64s(0, 16), i64s(0, len(body)))
    header = patched(header, i64s(16), i64s(len(body)))
    return [(schema, b""), (header, body)]


def big_deltas(value_bytes, deltas):
    """The deltas attack's dictionary, then `deltas` deltas of one string of `value_bytes`
    each: its delta's value buffer and body lengths patched."""
    (schema, _), dictionary, (delta, _) = ipc_messages("deltas")[:3]
    body = (0).to_bytes(4, "little") + value_bytes.to_bytes(4, "little") + value_bytes.to_bytes(4, "little")
    body += bytes(4) + b"x" * value_bytes
    delta = patched(delta, i64s(16, 6), i64s(16, value_bytes))
    delta = patched(delta, i64s(24), i64s(len(body)))
    return [(schema, b""), dictionary] + [(delta, body)] * deltas


def exchange_attack(server, game, messages, results):
    """One DoExchange of `messages` under [game]; its end (grpc-status, message) in `results`."""
    c = H2(server)
    sid = c.open_call(None, path=DO_EXCHANGE)
    try:
        for i, (header, body) in enumerate(messages):
            data = grpc_frame(flight_data(header, body, [game] if i == 0 else None))
            if not c.send(sid, data, end=i == len(messages) - 1):
                break
    except h2.exceptions.ProtocolError:  # the server ended the call mid-send: its trailers tell why
        pass
    results.append(c.wait_statuses([sid], 60)[sid])
    c.sock.close()


def probe_flight_ipc(server):
    print("Arrow Flight: each hostile IPC message from 4 clients at once", flush=True)
    attacks = [
        ("LZ4 claim of 2^62 bytes", "stone_game_iv", ipc_messages("lz4-claim"), "8"),
        ("zstd claim of 2^62 bytes", "stone_game_iv", ipc_messages("zstd-claim"), "8"),
        ("33 KB zstd body inflating to 1 GiB", "stone_game_iv", zstd_bomb(), "8"),
        ("2^40 rows of fixed_size_list<int8, 0>", "stone_game_ix", ipc_messages("rows"), "8"),
        ("a buffer at offset 2^62", "stone_game_iv", ipc_messages("offset"), "3"),
        ("a buffer of negative length", "stone_game_iv", ipc_messages("negative-length"), "3"),
        ("a body shorter than its buffers", "stone_game_iv", ipc_messages("short-body"), "3"),
        ("a dictionary and 5 deltas of 16 MiB", "mixed", big_deltas(16 * MIB, 5), "8"),
    ]
    for name, game, messages, code in attacks:
        server.reset_peak()
        before = server.rss()
        results = []
        callers = [threading.Thread(target=exchange_attack, args=(server, game, messages, results)) for _ in range(4)]
        for t in callers:
            t.start()
        time.sleep(0.1)
        bystander = health(server)
        for t in callers:
            t.join()
        # Refused by the IPC reader, or by the budget (which shares one address's memory
        # among its four calls).
        reasons = ("cannot read the exchange's data", "request memory", "retry later")
        refused = sum(1 for r in results
                      if r.get("grpc-status") == code and any(m in r.get("grpc-message", "") for m in reasons))
        check(refused == 4, f"{name}: {refused} of 4 refused with status {code}: "
                            f"{sorted({r.get('grpc-message') for r in results})}")
        check(bystander is not None, f"{name}: a bystander's health check took {bystander and round(bystander, 3)} s")
        check(server.proc.poll() is None, f"{name}: the server is still running")
        report(name, server, before)
        check(server.hwm() - before < 256 * MIB, f"{name}: peak stays within the request-byte budget (256 MiB)")


def connect_json_batch(shape, size):
    """A SolveBatch request in JSON of about `size` bytes: `small`, many small problems
    (whose structs are many times their text); `string`, one Sum Game of that many
    characters."""
    if shape == "string":
        return b'{"problems":[{"sumGame":{"num":"' + b"1" * (size - 40) + b'"}}]}'
    one = b'{"stoneGameIv":{"n":"12345"}},'
    count = size // len(one)
    return b'{"problems":[' + one * (count - 1) + one[:-1] + b"]}"


def post_json(server, source, body):
    """POSTs `body` to SolveBatch over HTTP/1.1 from the address `source`; the HTTP status
    and the start of the answer."""
    sock = socket.create_connection((server.host, server.port), timeout=120, source_address=(source, 0))
    try:
        head = (f"POST {SERVICE}SolveBatch HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head)
        sock.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None
        return status, answer[:300]
    finally:
        sock.close()


def probe_connect_json(server):
    for shape, expected in (("small", 429), ("string", 200)):
        print(f"4 Connect JSON batches of 60 MiB ({shape}) from 127.0.0.2-5, a bystander's Solve on 127.0.0.1",
              flush=True)
        body = connect_json_batch(shape, 60 * MIB)
        server.reset_peak()
        before = server.rss()
        results = []
        callers = [threading.Thread(target=lambda a=a: results.append(post_json(server, f"127.0.0.{a}", body)))
                   for a in range(2, 6)]
        for t in callers:
            t.start()
        latencies = []
        with grpc.insecure_channel(server.addr) as channel:
            solve = channel.unary_unary(SERVICE + "Solve")
            request = field(1, sum_problem("bystander", "25??"))
            while any(t.is_alive() for t in callers) and len(latencies) < 600:
                start = time.monotonic()
                try:
                    solve(request, timeout=20)
                    latencies.append(time.monotonic() - start)
                except grpc.RpcError:
                    latencies.append(None)
                time.sleep(0.05)
        for t in callers:
            t.join()
        statuses = sorted(status for status, _ in results)
        check(statuses == [expected] * 4, f"the four are answered {expected}: {statuses} "
                                          f"{sorted({head[:120] for _, head in results})}")
        answered = [latency for latency in latencies if latency is not None]
        check(len(answered) == len(latencies) and answered,
              f"the bystander's {len(latencies)} Solves answered, the slowest in "
              f"{max(answered, default=0) * 1000:.0f} ms, the median "
              f"{sorted(answered)[len(answered) // 2] * 1000 if answered else 0:.0f} ms")
        time.sleep(3)
        report(f"Connect JSON ({shape})", server, before)
        check(server.hwm() - before < (256 + 128) * MIB,
              "peak stays within the request-byte budget (256 MiB) and the decoding's fixed overhead")


def probe_rapid_reset(server):
    print(f"rapid reset: streams opened and reset at once, {RAPID_RESET_SECONDS} s", flush=True)
    lines = server.log_text().count("\n")
    deadline = time.monotonic() + RAPID_RESET_SECONDS
    attacks = 0
    while time.monotonic() < deadline:
        try:
            c = H2(server)
            for _ in range(2000):
                sid = c.open_call("Solve")
                c.conn.reset_stream(sid)
            c.flush()
            c.pump(0.05)
            c.sock.close()
            attacks += 1
        except (OSError, h2.exceptions.ProtocolError):
            attacks += 1
    logged = server.log_text().count("\n") - lines
    check(logged <= 30, f"{attacks} attacking connections wrote {logged} log lines")
    check(health(server) is not None, "still served")


def mixed_load(server, seconds=MIXED_LOAD_SECONDS):
    print(f"mixed load: unary calls and streams for {seconds} s, clients killed at random", flush=True)
    server.reset_peak()
    before = server.rss()
    problems = [sum_problem(str(i), "".join(random.choice("0123456789?") for _ in range(2 * random.randint(1, 2000))))
                if i % 2 else iv_problem(str(i), random.randint(1, 100000)) for i in range(200)]
    with grpc.insecure_channel(server.addr) as channel:
        solve = channel.unary_unary(SERVICE + "Solve")
        expected = {i: solve(field(1, p), timeout=30) for i, p in enumerate(problems)}
    wrong, answered, cancelled, errors = [], [0], [0], []
    stop = time.monotonic() + seconds

    def unary_worker():
        with grpc.insecure_channel(server.addr) as channel:
            solve = channel.unary_unary(SERVICE + "Solve")
            while time.monotonic() < stop:
                i = random.randrange(len(problems))
                future = solve.future(field(1, problems[i]), timeout=30)
                if random.random() < 0.05:
                    future.cancel()
                    cancelled[0] += 1
                    continue
                try:
                    if future.result() != expected[i]:
                        wrong.append(i)
                    answered[0] += 1
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.CANCELLED:
                        errors.append(err.code())

    def stream_worker():
        while time.monotonic() < stop:
            with grpc.insecure_channel(server.addr) as channel:
                stream = channel.stream_stream(SERVICE + "SolveStream")
                order = [random.randrange(len(problems)) for _ in range(random.randint(1, 300))]
                kill_after = random.randrange(len(order)) if random.random() < 0.2 else None
                call = stream(iter([field(1, problems[i]) for i in order]), timeout=60)
                try:
                    for n, answer in enumerate(call):
                        if n == kill_after:
                            call.cancel()
                            cancelled[0] += 1
                            break
                        # A stream answer has the same shape as Solve's response.
                        if answer != expected[order[n]]:
                            wrong.append(order[n])
                        answered[0] += 1
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.CANCELLED:
                        errors.append(err.code())

    threads = [threading.Thread(target=unary_worker) for _ in range(8)]
    threads += [threading.Thread(target=stream_worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not wrong, f"{answered[0]} answers, {len(wrong)} wrong, {cancelled[0]} calls killed")
    check(not errors, f"no unexpected status ({errors[:5]})")
    time.sleep(3)
    report("mixed load", server, before)


def probe_sigterm():
    print("SIGTERM with an idle peer (--shutdown-timeout 30)", flush=True)
    server = Server()
    silent = socket.create_connection((server.host, server.port))
    idle = H2(server)
    idle.pump(0.2)
    start = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(40)
    took = time.monotonic() - start
    check(code == 0 and took < 5, f"exit {code} after {took:.2f} s")
    check("dropping the calls still in flight" not in server.log_text(), "no call reported dropped")
    silent.close()
    idle.sock.close()
    server.stop()


def main():
    # A SIGTERM (from `timeout`) unwinds through the `finally`s, which stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    server = Server()
    idle_rss = server.rss()
    print(f"server idle RSS {idle_rss / MIB:.0f} MB", flush=True)
    try:
        probe_idle_connections(server)
        probe_ping_only(server)
        probe_silent_streams(server)
        probe_gzip_bomb(server)
        probe_parallel_inflation(server, "gzip")
        probe_parallel_inflation(server, "zstd")
        probe_small_stones(server)
        probe_flight_ipc(server)
        probe_connect_json(server)
        probe_rapid_reset(server)
        mixed_load(server)
        time.sleep(2)
        print(f"server RSS: idle {idle_rss / MIB:.0f} MB, the last probe's peak {server.hwm() / MIB:.0f} MB, "
              f"after all probes {server.rss() / MIB:.0f} MB", flush=True)
        check(server.rss() - idle_rss < 64 * MIB, "memory returns near its idle size")
        check(server.proc.poll() is None, "the server is still running")
    finally:
        server.stop()
    probe_fd_exhaustion()
    probe_sigterm()
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed", flush=True)
    print(f"{len(passes)} passed, {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
