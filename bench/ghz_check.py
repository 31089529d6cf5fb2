#!/usr/bin/env python3
"""Reads what ghz wrote for bench/ghz.sh.

  table REPORT:PROBLEMS...   ghz JSON reports -> markdown table; exit 1 on any non-OK call
  verify DEBUG_LOG...        ghz --debug logs -> every answer checked; exit 1 on a wrong one

Answers are checked against references written from the seeds' proofs, independently of
the Rust solvers: an exhaustive game search where the game is small, the seeds' closed
forms otherwise, and every winning move is played out against all of Bob's replies.
"""

import json
import re
import sys
from functools import lru_cache


# --- table ----------------------------------------------------------------------------

def table(args):
    rows, failed = [], False
    for arg in args:
        path, _, problems = arg.rpartition(":")
        with open(path) as f:
            report = json.load(f)
        codes = report.get("statusCodeDistribution") or {}
        errors = sum(n for code, n in codes.items() if code != "OK")
        if errors or report.get("errorDistribution"):
            failed = True
            print(f"{report['name']}: non-OK calls {codes} {report.get('errorDistribution')}",
                  file=sys.stderr)
        if not codes.get("OK"):
            failed = True
            print(f"{report['name']}: no successful call", file=sys.stderr)
        latency = {d["percentage"]: d["latency"] for d in report.get("latencyDistribution") or []}
        rps = report["rps"]
        problems_per_s = f"{rps * int(problems):,.0f}" if int(problems) else "-"
        rows.append(f"| {report['name']} | {rps:,.0f} | {problems_per_s} | "
                    f"{ms(latency.get(50))} | {ms(latency.get(99))} | {report['count']:,} | {errors} |")
    print("| scenario | calls/s | problems/s | p50 | p99 | calls | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    return 1 if failed else 0


def ms(nanoseconds):
    return "-" if nanoseconds is None else f"{nanoseconds / 1e6:.2f} ms"


# --- reference solutions --------------------------------------------------------------

def sum_game_tally(num):
    half = len(num) // 2
    tallies = []
    for part in (num[:half], num[half:]):
        tallies.append((sum(int(c) for c in part if c != "?"), part.count("?")))
    (n0, q0), (n1, q1) = tallies
    return n0 - n1, q0, q1


@lru_cache(maxsize=None)
def sum_game_search(diff, q0, q1, alice_to_move):
    """Exhaustive: does Alice win? diff = left sum - right sum."""
    if q0 == q1 == 0:
        return diff != 0
    outcomes = [sum_game_search(diff + d, q0 - 1, q1, not alice_to_move) for d in range(10) if q0] + \
               [sum_game_search(diff - d, q0, q1 - 1, not alice_to_move) for d in range(10) if q1]
    return any(outcomes) if alice_to_move else all(outcomes)


def sum_game_alice_wins(diff, q0, q1, alice_to_move=True):
    if q0 + q1 <= 8:
        return sum_game_search(diff, q0, q1, alice_to_move)
    # The seeds' closed form, without its integer division: Bob wins iff 2*diff == 9*(q1-q0).
    assert alice_to_move
    return (q0 + q1) % 2 == 1 or 2 * diff != 9 * (q1 - q0)


def check_sum_game(num, solution):
    diff, q0, q1 = sum_game_tally(num)
    expect(solution["alice_wins"] == sum_game_alice_wins(diff, q0, q1), "winner", num, solution)
    move = solution["move"]
    if not solution["alice_wins"] or q0 + q1 == 0:
        expect(move is None, "no move expected", num, solution)
        return
    expect(move is not None and "sum_game" in move, "a sum game move", num, solution)
    index, digit = int(move["sum_game"].get("index", 0)), int(move["sum_game"].get("digit", 0))
    expect(num[index] == "?" and 0 <= digit <= 9, "move on a '?'", num, solution)
    left = index < len(num) // 2
    after = (diff + digit, q0 - 1, q1) if left else (diff - digit, q0, q1 - 1)
    if q0 + q1 <= 8:
        expect(sum_game_search(*after, False), "the move wins", num, solution)


@lru_cache(maxsize=None)
def stone_game_ix_search(c0, c1, c2, total, alice_to_move):
    """Exhaustive over residue counts: does Alice win? total = removed sum mod 3."""
    if c0 + c1 + c2 == 0:
        return False
    outcomes = []
    for residue, left in ((0, c0), (1, c1), (2, c2)):
        if not left:
            continue
        counts = [c0, c1, c2]
        counts[residue] -= 1
        after = (total + residue) % 3
        if after == 0:
            outcomes.append(not alice_to_move)  # the mover loses
        elif sum(counts) == 0:
            outcomes.append(False)  # the stones ran out: Bob wins
        else:
            outcomes.append(stone_game_ix_search(*counts, after, not alice_to_move))
    return any(outcomes) if alice_to_move else all(outcomes)


def stone_game_ix_alice_wins(counts):
    c0, c1, c2 = counts
    if sum(counts) <= 30:
        return stone_game_ix_search(c0, c1, c2, 0, True)
    # The seeds' official solution.
    return (c1 >= 1 and c2 >= 1) if c0 % 2 == 0 else abs(c1 - c2) > 2


def check_stone_game_ix(stones, solution):
    counts = [sum(1 for s in stones if s % 3 == r) for r in range(3)]
    expect(solution["alice_wins"] == stone_game_ix_alice_wins(counts), "winner", stones, solution)
    move = solution["move"]
    if not solution["alice_wins"]:
        expect(move is None, "no move expected", stones, solution)
        return
    expect(move is not None and "stone_game_ix" in move, "a stone game ix move", stones, solution)
    index = int(move["stone_game_ix"].get("index", 0))
    residue = stones[index] % 3
    expect(residue != 0, "not opening with a multiple of 3", stones, solution)
    counts[residue] -= 1
    if sum(counts) <= 30:
        won = sum(counts) > 0 and stone_game_ix_search(*counts, residue, False)
        expect(won, "the move wins", stones, solution)


class StoneGameIv:
    """Win table of the square-subtraction game, grown from the losing positions."""

    def __init__(self):
        self.win = bytearray(1)

    def alice_wins(self, n):
        if n >= len(self.win):
            size = max(n + 1, 2 * len(self.win))
            win = bytearray(size)
            for m in range(size):
                if not win[m]:
                    k = 1
                    while m + k * k < size:
                        win[m + k * k] = 1
                        k += 1
            self.win = win
        return bool(self.win[n])


STONE_GAME_IV = StoneGameIv()


def check_stone_game_iv(n, solution):
    expect(solution["alice_wins"] == STONE_GAME_IV.alice_wins(n), "winner", n, solution)
    move = solution["move"]
    if not solution["alice_wins"]:
        expect(move is None, "no move expected", n, solution)
        return
    take = int(move["stone_game_iv"]["take"])
    root = int(take ** 0.5 + 0.5)
    expect(take > 0 and root * root == take and take <= n, "take a square", n, solution)
    expect(not STONE_GAME_IV.alice_wins(n - take), "the move wins", n, solution)


class NimSquare:
    """Grundy values of the square-subtraction game, by the plain dynamic programme."""

    def __init__(self):
        self.values = [0]

    def value(self, n):
        while n >= len(self.values):
            m = len(self.values)
            seen = {self.values[m - k * k] for k in range(1, int(m ** 0.5) + 1)}
            self.values.append(next(v for v in range(len(seen) + 1) if v not in seen))
        return self.values[n]


NIM_SQUARE = NimSquare()


def check_nim_square(piles, solution):
    nim_value = 0
    for n in piles:
        nim_value ^= NIM_SQUARE.value(n)
    expect(int(solution["nim_value"] or 0) == nim_value, "nim value", piles, solution)
    expect(solution["alice_wins"] == (nim_value != 0), "winner", piles, solution)
    move = solution["move"]
    if nim_value == 0:
        expect(move is None, "no move expected", piles, solution)
        return
    pile, take = int(move["nim_square"].get("pile", 0)), int(move["nim_square"]["take"])
    root = int(take ** 0.5 + 0.5)
    expect(pile < len(piles) and take > 0 and root * root == take and take <= piles[pile], "a legal move",
           piles, solution)
    after = nim_value ^ NIM_SQUARE.value(piles[pile]) ^ NIM_SQUARE.value(piles[pile] - take)
    expect(after == 0, "the move wins", piles, solution)


class WrongAnswer(Exception):
    pass


def expect(condition, what, problem, solution):
    if not condition:
        raise WrongAnswer(f"{what}: problem {str(problem)[:80]} got {solution}")


# --- reading ghz's logs ---------------------------------------------------------------
# Unary calls are logged as protobuf JSON (camelCase, uint64 as strings, defaults left out),
# stream messages in protobuf text format (snake_case). Both become the same dicts.

def snake(name):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def normalise(value):
    if isinstance(value, dict):
        return {snake(k): normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


REPEATED = {"stones", "piles", "problems", "solutions"}
TOKEN = re.compile(r'\s*(?:(<|>|\{|\})|([A-Za-z_][A-Za-z0-9_]*)\s*:?|("(?:[^"\\]|\\.)*")|(-?[0-9][0-9.eE+-]*))')


def parse_text_format(text):
    """A minimal protobuf text-format reader, enough for this service's messages."""
    tokens = []
    for m in TOKEN.finditer(text):
        brace, name, string, number = m.groups()
        if brace:
            tokens.append(("brace", brace))
        elif name is not None:
            tokens.append(("name", name))
        elif string is not None:
            tokens.append(("value", json.loads(string)))
        else:
            tokens.append(("value", number))
    pos = 0

    def message():
        nonlocal pos
        fields = {}
        while pos < len(tokens) and tokens[pos][1] not in (">", "}"):
            _, field = tokens[pos]
            pos += 1
            kind, token = tokens[pos]
            if kind == "brace":
                pos += 1
                value = message()
                pos += 1  # the closing brace
            else:
                value = token
                pos += 1
            if field in REPEATED:
                fields.setdefault(field, []).append(value)
            else:
                fields[field] = value
        return fields

    return message()


def solution_of(raw):
    return {
        "id": raw.get("id", ""),
        "alice_wins": raw.get("alice_wins") in (True, "true"),
        "winner": raw.get("winner"),
        "move": raw.get("winning_move"),
        "error": raw.get("error"),
        "nim_value": raw.get("nim_value"),
    }


def check_pair(problem, raw_solution):
    solution = solution_of(raw_solution)
    expect(solution["error"] is None, "no error", problem, solution)
    expect(solution["id"] == problem.get("id", ""), "id echoed", problem, solution)
    expect(solution["winner"] == ("WINNER_ALICE" if solution["alice_wins"] else "WINNER_BOB"), "winner field",
           problem, solution)
    if "sum_game" in problem:
        check_sum_game(problem["sum_game"].get("num", ""), solution)
    elif "stone_game_ix" in problem:
        check_stone_game_ix([int(s) for s in problem["stone_game_ix"].get("stones", [])], solution)
    elif "stone_game_iv" in problem:
        check_stone_game_iv(int(problem["stone_game_iv"].get("n", 0)), solution)
    elif "nim_square" in problem:
        check_nim_square([int(n) for n in problem["nim_square"].get("piles", [])], solution)
    else:
        expect(False, "a known game", problem, solution)


def check_request(request, response):
    """One request message and its response: one problem or a batch of them."""
    if "problem" in request or "solution" in response:
        check_pair(request.get("problem", {}), response.get("solution", {}))
        return 1
    if "problems" in request or "solutions" in response:
        problems, solutions = request.get("problems", []), response.get("solutions", [])
        expect(len(problems) == len(solutions), "one solution per problem", len(problems), len(solutions))
        for problem, solution in zip(problems, solutions):
            check_pair(problem, solution)
        return len(problems)
    raise WrongAnswer(f"neither a problem nor a batch: {request}")


def verify_log(path):
    sent, received, checked = [], [], 0
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            message = entry.get("message")
            if entry.get("level") == "error":
                raise WrongAnswer(f"ghz error: {entry}")
            if message == "Received response":
                if entry.get("error"):
                    raise WrongAnswer(f"call failed: {entry['error']}")
                request = normalise(json.loads(entry["input"]))
                checked += check_request(request, normalise(json.loads(entry["response"])))
            elif message == "Send message":
                sent.append(parse_text_format(entry["payload"]))
            elif message == "Receive message" and entry.get("response"):
                received.append(parse_text_format(entry["response"]))
    # Stream answers come back in request order, so the n-th received answers the n-th sent.
    expect(len(sent) == len(received), "one answer per streamed message", len(sent), len(received))
    for request, response in zip(sent, received):
        checked += check_request(request, response)
    if checked == 0:
        raise WrongAnswer(f"{path}: no answer to check")
    return checked


def verify(paths):
    failed = False
    for path in paths:
        try:
            print(f"{path}: {verify_log(path)} answers correct", file=sys.stderr)
        except (WrongAnswer, KeyError, ValueError, IndexError) as err:
            failed = True
            print(f"{path}: WRONG: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    commands = {"table": table, "verify": verify}
    if len(sys.argv) < 3 or sys.argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
