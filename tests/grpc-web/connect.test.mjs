// The Connect protocol as Connect's own clients speak it, against a real gamesolver-server
// with default flags: @connectrpc/connect-node's Connect transport over HTTP/1.1 and
// HTTP/2, JSON and binary, with stubs from `buf generate` (protoc-gen-es); and the GET
// form of Solve as any HTTP client sends it. Run by .ci/connect.sh, which starts the server.
//
// Environment: GAMESOLVER_ADDR (host:port).
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport } from "@connectrpc/connect-node";

import { GameSolverService, SolutionError_Code, Winner } from "./gen/gamesolver/v1/gamesolver_pb.js";
import { decodeBadRequest, decodeErrorInfo } from "./rich-error.mjs";

const addr = process.env.GAMESOLVER_ADDR;
assert.ok(addr, "GAMESOLVER_ADDR (host:port of a running gamesolver-server) is not set");
const baseUrl = `http://${addr}`;
const callOptions = { timeoutMs: 10_000 };

// Every transport the door serves: each HTTP version, JSON and binary, and a gzipped
// request body (compressMinBytes 0 compresses every request).
const transports = [];
for (const httpVersion of ["1.1", "2"]) {
  for (const useBinaryFormat of [false, true]) {
    transports.push({ httpVersion, useBinaryFormat });
  }
  transports.push({ httpVersion, useBinaryFormat: false, sendCompression: compressionGzip, compressMinBytes: 0 });
}
const name = (t) =>
  `HTTP/${t.httpVersion} ${t.useBinaryFormat ? "proto" : "JSON"}${t.sendCompression ? " gzip" : ""}`;

for (const options of transports) {
  const client = createClient(GameSolverService, createConnectTransport({ baseUrl, ...options }));

  test(`${name(options)}: Solve answers with the winner and Alice's move`, async () => {
    const response = await client.solve(
      { problem: { id: "a1", game: { case: "sumGame", value: { num: "25??" } } } },
      callOptions,
    );
    const solution = response.solution;
    assert.equal(solution.id, "a1");
    assert.equal(solution.winner, Winner.ALICE);
    assert.equal(solution.aliceWins, true);
    assert.equal(solution.winningMove?.game.case, "sumGame");
    assert.equal(solution.winningMove.game.value.index, 2n);
    assert.equal(solution.winningMove.game.value.digit, 9);
  });

  test(`${name(options)}: a bad problem's code, message and AIP-193 details`, async () => {
    const err = await client
      .solve({ problem: { game: { case: "sumGame", value: { num: "12x4" } } } }, callOptions)
      .then(
        () => assert.fail("a bad problem was answered"),
        (e) => e,
      );
    assert.ok(err instanceof ConnectError, String(err));
    assert.equal(err.code, Code.InvalidArgument, err.message);
    assert.equal(err.rawMessage, "sum game: invalid character 'x' at index 2; expected a digit or '?'");
    const detail = (type) => err.details.find((d) => (d.desc?.typeName ?? d.type) === type);
    const info = detail("google.rpc.ErrorInfo");
    assert.ok(info, `no google.rpc.ErrorInfo in ${JSON.stringify(err.details)}`);
    const expectedInfo = {
      reason: "INVALID_CHARACTER",
      domain: "gamesolver.v1",
      metadata: { index: "2", character: "x" },
    };
    assert.deepEqual(decodeErrorInfo(info.value), expectedInfo);
    assert.deepEqual(info.debug, expectedInfo);
    const badRequest = detail("google.rpc.BadRequest");
    assert.deepEqual(decodeBadRequest(badRequest.value).fieldViolations.map((v) => v.field), [
      "problem.sum_game.num",
    ]);
  });

  test(`${name(options)}: a pile above the server's limit is out of range`, async () => {
    const err = await client
      .solve({ problem: { game: { case: "stoneGameIv", value: { n: 5_000_000_000n } } } }, callOptions)
      .then(
        () => assert.fail("a pile above the limit was answered"),
        (e) => e,
      );
    assert.equal(err.code, Code.OutOfRange, err.message);
    const info = err.details.find((d) => d.type === "google.rpc.ErrorInfo");
    assert.deepEqual(decodeErrorInfo(info.value).metadata, { n: "5000000000", limit: "1000000000" });
  });

  test(`${name(options)}: SolveBatch answers in order, a bad problem in its place`, async () => {
    const response = await client.solveBatch(
      {
        problems: [
          { id: "ix", game: { case: "stoneGameIx", value: { stones: [1n, 1n, 7n, 10n, 8n, 17n, 10n, 20n, 2n, 10n] } } },
          { id: "iv", game: { case: "stoneGameIv", value: { n: 7n } } },
          { id: "bad", game: { case: "sumGame", value: { num: "123" } } },
        ],
      },
      callOptions,
    );
    const [ix, iv, bad] = response.solutions;
    assert.equal(response.solutions.length, 3);
    assert.equal(ix.winner, Winner.ALICE);
    assert.equal(ix.winningMove.game.value.index, 4n);
    assert.equal(iv.winner, Winner.BOB);
    assert.equal(bad.id, "bad");
    assert.equal(bad.error?.code, SolutionError_Code.INVALID_ARGUMENT);
    assert.equal(bad.error.reason, "ODD_LENGTH");
  });
}

test("a streaming RPC is not a Connect procedure: unimplemented", async () => {
  // Bidirectional streams need HTTP/2; the door serves unary procedures only.
  const client = createClient(GameSolverService, createConnectTransport({ baseUrl, httpVersion: "2" }));
  const requests = (async function* () {
    yield { problem: { id: "s", game: { case: "sumGame", value: { num: "11" } } } };
  })();
  const err = await (async () => {
    for await (const _ of client.solveStream(requests, callOptions)) {
      assert.fail("a stream was answered over Connect");
    }
  })().then(
    () => assert.fail("the stream ended without an error"),
    (e) => e,
  );
  assert.equal(ConnectError.from(err).code, Code.Unimplemented, String(err));
});

test("GET: Solve's message in the URL, as the protocol's GET form has it", async () => {
  const message = encodeURIComponent(JSON.stringify({ problem: { id: "g", stoneGameIv: { n: "7" } } }));
  const url = `${baseUrl}/gamesolver.v1.GameSolverService/Solve?connect=v1&encoding=json&message=${message}`;
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.deepEqual(await response.json(), { solution: { id: "g", aliceWins: false, winner: "WINNER_BOB" } });
});
