// gRPC-Web as a browser speaks it, against a real gamesolver-server started with
// --grpc-web --grpc-web-origin $ORIGIN: Connect's gRPC-Web transport (HTTP/1.1, as from a
// browser) with stubs from `buf generate` (protoc-gen-es), and the CORS preflight a
// browser sends before it. Run by .ci/grpc-web.sh, which starts the server.
//
// Browsers get unary calls only: gRPC-Web has no client streaming, so of the contract's
// RPCs they can call Solve and SolveBatch; SolveStream and SolveBatchStream are
// bidirectional and are not offered to them (the contract has no server-streaming RPC).
//
// Environment: GAMESOLVER_ADDR (host:port), ORIGIN (the allowed origin).
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";

import {
  GameSolverService,
  SolutionError_Code,
  Winner,
} from "./gen/gamesolver/v1/gamesolver_pb.js";
import { decodeErrorInfo } from "./rich-error.mjs";

const addr = process.env.GAMESOLVER_ADDR;
const origin = process.env.ORIGIN ?? "http://localhost:3000";
assert.ok(addr, "GAMESOLVER_ADDR (host:port of a server started with --grpc-web) is not set");
const baseUrl = `http://${addr}`;
const disallowedOrigin = "http://evil.example";
const solvePath = "/gamesolver.v1.GameSolverService/Solve";

// Every call as a page served from `origin` makes it; a bounded wait on each.
const client = createClient(
  GameSolverService,
  createGrpcWebTransport({
    baseUrl,
    httpVersion: "1.1",
    interceptors: [
      (next) => (req) => {
        req.header.set("origin", origin);
        return next(req);
      },
    ],
  }),
);
const callOptions = { timeoutMs: 10_000 };

// Says what to check when the server does not speak gRPC-Web at all.
async function call(what, promise) {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Unavailable) {
      err.message += ` (${what}: is the server at ${addr} started with --grpc-web?)`;
    }
    throw err;
  }
}

test("unary Solve: the winner and Alice's move, CORS headers on the answer", async () => {
  let headers;
  const response = await call(
    "Solve",
    client.solve(
      { problem: { id: "a1", game: { case: "sumGame", value: { num: "25??" } } } },
      { ...callOptions, onHeader: (h) => (headers = h) },
    ),
  );
  const solution = response.solution;
  assert.equal(solution.id, "a1");
  assert.equal(solution.winner, Winner.ALICE);
  assert.equal(solution.aliceWins, true);
  assert.equal(solution.winningMove?.game.case, "sumGame");
  assert.equal(solution.winningMove.game.value.index, 2n);
  assert.equal(solution.winningMove.game.value.digit, 9);
  // A browser hands the answer to the page only with these.
  assert.equal(headers.get("access-control-allow-origin"), origin);
  const exposed = (headers.get("access-control-expose-headers") ?? "").toLowerCase();
  for (const name of ["grpc-status", "grpc-message"]) {
    assert.ok(exposed.includes(name), `access-control-expose-headers lacks ${name}: "${exposed}"`);
  }
});

test("unary Solve: a bad problem's status and rich details survive gRPC-Web", async () => {
  const err = await call(
    "Solve",
    client.solve({ problem: { game: { case: "sumGame", value: { num: "12x4" } } } }, callOptions),
  ).then(
    () => assert.fail("a bad problem was answered"),
    (e) => e,
  );
  assert.ok(err instanceof ConnectError, String(err));
  assert.equal(err.code, Code.InvalidArgument, err.message);
  const types = err.details.map((d) => d.desc?.typeName ?? d.type);
  assert.ok(types.includes("google.rpc.BadRequest"), `details: ${types}`);
  const raw = err.details.find((d) => (d.desc?.typeName ?? d.type) === "google.rpc.ErrorInfo");
  assert.ok(raw, `no google.rpc.ErrorInfo in the details: ${types}`);
  assert.deepEqual(decodeErrorInfo(raw.value), {
    reason: "INVALID_CHARACTER",
    domain: "gamesolver.v1",
    metadata: { index: "2", character: "x" },
  });
});

test("unary SolveBatch: one solution a problem, in order, a bad one answered with its error", async () => {
  const response = await call(
    "SolveBatch",
    client.solveBatch(
      {
        problems: [
          { id: "ix", game: { case: "stoneGameIx", value: { stones: [1n, 1n, 7n, 10n, 8n, 17n, 10n, 20n, 2n, 10n] } } },
          { id: "iv", game: { case: "stoneGameIv", value: { n: 7n } } },
          { id: "bad", game: { case: "sumGame", value: { num: "123" } } },
        ],
      },
      callOptions,
    ),
  );
  const [ix, iv, bad] = response.solutions;
  assert.equal(response.solutions.length, 3);
  assert.equal(ix.id, "ix");
  assert.equal(ix.winner, Winner.ALICE);
  assert.equal(ix.winningMove?.game.case, "stoneGameIx");
  assert.equal(ix.winningMove.game.value.index, 4n);
  assert.equal(iv.id, "iv");
  assert.equal(iv.winner, Winner.BOB);
  assert.equal(iv.winningMove, undefined);
  assert.equal(bad.id, "bad");
  assert.equal(bad.winner, Winner.UNSPECIFIED);
  assert.equal(bad.error?.code, SolutionError_Code.INVALID_ARGUMENT);
  assert.equal(bad.error.reason, "ODD_LENGTH");
});

// The preflight a browser sends before a gRPC-Web POST from another origin.
function preflight(from) {
  return fetch(baseUrl + solvePath, {
    method: "OPTIONS",
    headers: {
      origin: from,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout",
    },
    signal: AbortSignal.timeout(10_000),
  });
}

test("CORS preflight from an allowed origin is granted", async () => {
  const response = await preflight(origin);
  assert.ok(response.ok, `status ${response.status}`);
  assert.equal(response.headers.get("access-control-allow-origin"), origin);
  const methods = (response.headers.get("access-control-allow-methods") ?? "").toUpperCase();
  assert.ok(methods.includes("POST"), `access-control-allow-methods: "${methods}"`);
  const allowed = (response.headers.get("access-control-allow-headers") ?? "").toLowerCase();
  for (const name of ["content-type", "x-grpc-web"]) {
    assert.ok(allowed === "*" || allowed.includes(name), `access-control-allow-headers lacks ${name}: "${allowed}"`);
  }
});

test("CORS preflight from another origin is not granted", async () => {
  const response = await preflight(disallowedOrigin);
  const granted = response.headers.get("access-control-allow-origin");
  // Refused outright (4xx) or answered without the grant: either way a browser stops.
  assert.ok(granted !== disallowedOrigin && granted !== "*", `granted to ${granted}`);
});
