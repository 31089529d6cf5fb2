// Command interop is a second, independent client of gamesolver: grpc-go and the Go
// protobuf runtime, through the repository's Go module (clients/go: the stubs that
// .ci/generate.sh makes with buf, and its richerror package). It checks
// what a Go user of the contract relies on, and exits 1 with a message on any mismatch.
//
//	interop check ADDR PROBLEMS.jsonl   read the file with protojson (one Problem a line;
//	                                    lines it refuses are counted and skipped); the four
//	                                    RPCs must agree exactly, and bad problems must get
//	                                    AIP-193 rich errors (unary) and the same code,
//	                                    reason, field and metadata in Solution.error
//	interop message-limit ADDR BYTES    against a server started with --max-message-bytes
//	                                    BYTES: a larger request is RESOURCE_EXHAUSTED
//	interop deadline ADDR               against a cold server started with
//	                                    --request-timeout 0.05: a slow Solve is
//	                                    DEADLINE_EXCEEDED, a quick one is answered
//	interop pipeline ADDR               10,000 small SolveStream requests sent without
//	                                    waiting for answers are all answered, in order
//
// .ci/interop-go.sh starts the servers and runs all three.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	pb "github.com/gamesolver/gamesolver/gen/go/gamesolver/v1"
	"github.com/gamesolver/gamesolver/gen/go/richerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// callTimeout bounds every call the checks make, so that a hung server fails the run.
const callTimeout = 60 * time.Second

// batchStreamChunk is the number of problems a SolveBatchStream request carries: small and
// odd, so that the file makes many batches and the last one is short.
const batchStreamChunk = 7

// streamWindow is the most requests the agreement check sends on a stream ahead of the
// responses: far more than the server solves ahead (64), so the server still answers
// while the client sends, and far fewer small DATA frames than the ~2,200 that the
// server's HTTP/2 layer (h2 0.4.20) holds unread before it closes the connection; the
// pipeline check is the one that sends without a window.
const streamWindow = 512

// pipelineRequests is how many small requests the pipeline check sends on one SolveStream
// without waiting for a response: about 250 KB, a quarter of the server's flow-control
// window (hyper's 1 MiB), so HTTP/2 flow control alone should pace the client.
const pipelineRequests = 10_000

func main() {
	log.SetFlags(0)
	log.SetPrefix("interop-go: ")
	if len(os.Args) < 3 {
		log.Fatal("usage: interop check ADDR PROBLEMS.jsonl | message-limit ADDR BYTES | deadline ADDR | pipeline ADDR")
	}
	conn, err := grpc.NewClient(os.Args[2], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGameSolverServiceClient(conn)

	var summary string
	switch cmd, args := os.Args[1], os.Args[3:]; {
	case cmd == "check" && len(args) == 1:
		summary, err = check(client, args[0])
	case cmd == "message-limit" && len(args) == 1:
		var limit int
		if limit, err = strconv.Atoi(args[0]); err == nil {
			summary, err = checkMessageLimit(client, limit)
		}
	case cmd == "deadline" && len(args) == 0:
		summary, err = checkDeadline(client)
	case cmd == "pipeline" && len(args) == 0:
		summary, err = checkPipeline(client)
	default:
		err = fmt.Errorf("unknown command or wrong arguments: %s", strings.Join(os.Args[1:], " "))
	}
	if err != nil {
		conn.Close()
		log.Fatal(err)
	}
	fmt.Println("interop-go: " + summary)
}

// check runs the agreement check on the problems of path, then the rich-error cases.
func check(client pb.GameSolverServiceClient, path string) (string, error) {
	problems, refused, err := readProblems(path)
	if err != nil {
		return "", err
	}
	if err := checkAgreement(client, problems); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range badCases() {
		if err := checkBadCase(client, c); err != nil {
			return "", fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return fmt.Sprintf("%s: %d problems, %d lines refused by protojson: Solve, SolveBatch, "+
		"SolveStream and SolveBatchStream agree, winner_only too; %d bad problems get the "+
		"expected rich errors from all four", path, len(problems), refused, len(badCases())), nil
}

// readProblems parses one Problem a line with protojson, the reference JSON mapping. A line
// it refuses is counted and skipped; a missing id becomes the line number, as the bulk
// client does.
func readProblems(path string) (problems []*pb.Problem, refused int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 64<<20)
	for number := 1; lines.Scan(); number++ {
		problem := &pb.Problem{}
		if err := protojson.Unmarshal(lines.Bytes(), problem); err != nil {
			refused++
			continue
		}
		if problem.Id == "" {
			problem.Id = strconv.Itoa(number)
		}
		problems = append(problems, problem)
	}
	return problems, refused, lines.Err()
}

// checkAgreement solves every problem through the four RPCs, and once more through
// SolveBatch with winner_only; all must give the same solutions. A problem that Solve
// rejects must get, from the others, the error its status details describe.
func checkAgreement(client pb.GameSolverServiceClient, problems []*pb.Problem) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	unary := make([]*pb.Solution, len(problems))
	for i, p := range problems {
		resp, err := client.Solve(ctx, &pb.SolveRequest{Problem: p})
		if err != nil {
			solutionError, detailsErr := solutionErrorOf(err)
			if detailsErr != nil {
				return fmt.Errorf("Solve of problem %q: %w", p.Id, detailsErr)
			}
			unary[i] = &pb.Solution{Id: p.Id, Error: solutionError}
			continue
		}
		if resp.Solution.GetError() != nil {
			return fmt.Errorf("Solve of problem %q: an answer with error set: %s", p.Id, show(resp))
		}
		unary[i] = resp.Solution
	}

	batch, err := client.SolveBatch(ctx, &pb.SolveBatchRequest{Problems: problems})
	if err != nil {
		return fmt.Errorf("SolveBatch: %w", err)
	}
	if err := sameSolutions("SolveBatch", batch.Solutions, unary); err != nil {
		return err
	}

	streamRequests := make([]*pb.SolveStreamRequest, len(problems))
	for i, p := range problems {
		streamRequests[i] = &pb.SolveStreamRequest{Problem: p}
	}
	streamResponses, err := solveStream(ctx, client, streamRequests, streamWindow)
	if err != nil {
		return fmt.Errorf("SolveStream: %w", err)
	}
	stream := make([]*pb.Solution, len(streamResponses))
	for i, r := range streamResponses {
		stream[i] = r.Solution
	}
	if err := sameSolutions("SolveStream", stream, unary); err != nil {
		return err
	}

	var batches []*pb.SolveBatchStreamRequest
	for start := 0; start < len(problems); start += batchStreamChunk {
		end := min(start+batchStreamChunk, len(problems))
		batches = append(batches, &pb.SolveBatchStreamRequest{Problems: problems[start:end]})
	}
	batchResponses, err := solveBatchStream(ctx, client, batches, streamWindow)
	if err != nil {
		return fmt.Errorf("SolveBatchStream: %w", err)
	}
	if len(batchResponses) != len(batches) {
		return fmt.Errorf("SolveBatchStream: %d responses for %d requests", len(batchResponses), len(batches))
	}
	var batchStream []*pb.Solution
	for i, r := range batchResponses {
		if len(r.Solutions) != len(batches[i].Problems) {
			return fmt.Errorf("SolveBatchStream: response %d has %d solutions for %d problems",
				i, len(r.Solutions), len(batches[i].Problems))
		}
		batchStream = append(batchStream, r.Solutions...)
	}
	if err := sameSolutions("SolveBatchStream", batchStream, unary); err != nil {
		return err
	}

	winnersOnly, err := client.SolveBatch(ctx, &pb.SolveBatchRequest{Problems: problems, WinnerOnly: true})
	if err != nil {
		return fmt.Errorf("SolveBatch with winner_only: %w", err)
	}
	withoutMoves := make([]*pb.Solution, len(unary))
	for i, s := range unary {
		withoutMoves[i] = proto.CloneOf(s)
		withoutMoves[i].WinningMove = nil
	}
	return sameSolutions("SolveBatch with winner_only (against Solve without its moves)",
		winnersOnly.Solutions, withoutMoves)
}

// sameSolutions reports the first solution of got that differs from want.
func sameSolutions(rpc string, got, want []*pb.Solution) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d solutions for %d problems", rpc, len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			return fmt.Errorf("%s disagrees with Solve on problem %d (id %q):\n  got  %s\n  want %s",
				rpc, i, want[i].GetId(), show(got[i]), show(want[i]))
		}
	}
	return nil
}

// badCase is a request that must fail, and the error it must fail with.
type badCase struct {
	name    string
	request *pb.SolveRequest
	want    *pb.SolutionError // Message is not compared: it is for people
}

// badCases are the bad problems of the contract, one per reason a client can cause.
func badCases() []badCase {
	sum := func(num string) *pb.Problem {
		return &pb.Problem{Id: "bad", Game: &pb.Problem_SumGame{SumGame: &pb.SumGame{Num: num}}}
	}
	return []badCase{{
		name:    "sumGame 12x4",
		request: &pb.SolveRequest{Problem: sum("12x4")},
		want: &pb.SolutionError{
			Code: pb.SolutionError_CODE_INVALID_ARGUMENT, Reason: "INVALID_CHARACTER",
			Field: "problem.sum_game.num", Metadata: map[string]string{"index": "2", "character": "x"},
		},
	}, {
		name:    "sumGame 123",
		request: &pb.SolveRequest{Problem: sum("123")},
		want: &pb.SolutionError{
			Code: pb.SolutionError_CODE_INVALID_ARGUMENT, Reason: "ODD_LENGTH",
			Field: "problem.sum_game.num", Metadata: map[string]string{"length": "3"},
		},
	}, {
		name:    "problem without a game",
		request: &pb.SolveRequest{Problem: &pb.Problem{Id: "bad"}},
		want: &pb.SolutionError{
			Code: pb.SolutionError_CODE_INVALID_ARGUMENT, Reason: "NO_GAME", Field: "problem.game",
		},
	}, {
		name:    "request without a problem",
		request: &pb.SolveRequest{},
		want: &pb.SolutionError{
			Code: pb.SolutionError_CODE_INVALID_ARGUMENT, Reason: "MISSING_PROBLEM", Field: "problem",
		},
	}, {
		name: "stoneGameIv n=10^10",
		request: &pb.SolveRequest{Problem: &pb.Problem{
			Id: "bad", Game: &pb.Problem_StoneGameIv{StoneGameIv: &pb.StoneGameIv{N: 10_000_000_000}},
		}},
		want: &pb.SolutionError{
			Code: pb.SolutionError_CODE_OUT_OF_RANGE, Reason: "PILE_ABOVE_LIMIT", Field: "problem.stone_game_iv.n",
			Metadata: map[string]string{"n": "10000000000", "limit": "1000000000"},
		},
	}}
}

// checkBadCase sends the case through Solve (the status and its details) and through the
// batch and streaming RPCs between two good problems (Solution.error, the others answered).
func checkBadCase(client pb.GameSolverServiceClient, c badCase) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	resp, err := client.Solve(ctx, c.request)
	if err == nil {
		return fmt.Errorf("Solve succeeded: %s", show(resp))
	}
	got, err := solutionErrorOf(err)
	if err != nil {
		return fmt.Errorf("Solve: %w", err)
	}
	if err := sameError("Solve's status", got, c.want); err != nil {
		return err
	}

	good := &pb.Problem{Id: "good", Game: &pb.Problem_StoneGameIv{StoneGameIv: &pb.StoneGameIv{N: 1}}}
	var wantId string
	if c.request.Problem != nil {
		wantId = c.request.Problem.Id
	}
	answers := map[string][]*pb.Solution{}

	// A batch cannot hold an unset problem: MISSING_PROBLEM exists only for Solve and SolveStream.
	if c.request.Problem != nil {
		problems := []*pb.Problem{good, c.request.Problem, good}
		batch, err := client.SolveBatch(ctx, &pb.SolveBatchRequest{Problems: problems})
		if err != nil {
			return fmt.Errorf("SolveBatch: %w", err)
		}
		answers["SolveBatch"] = batch.Solutions
		responses, err := solveBatchStream(ctx, client, []*pb.SolveBatchStreamRequest{{Problems: problems}}, streamWindow)
		if err != nil {
			return fmt.Errorf("SolveBatchStream: %w", err)
		}
		if len(responses) != 1 {
			return fmt.Errorf("SolveBatchStream: %d responses for 1 request", len(responses))
		}
		answers["SolveBatchStream"] = responses[0].Solutions
	}
	responses, err := solveStream(ctx, client, []*pb.SolveStreamRequest{
		{Problem: good}, {Problem: c.request.Problem}, {Problem: good},
	}, streamWindow)
	if err != nil {
		return fmt.Errorf("SolveStream: %w", err)
	}
	for _, r := range responses {
		answers["SolveStream"] = append(answers["SolveStream"], r.Solution)
	}

	for rpc, solutions := range answers {
		if len(solutions) != 3 {
			return fmt.Errorf("%s: %d solutions for 3 problems", rpc, len(solutions))
		}
		for _, i := range []int{0, 2} {
			if s := solutions[i]; s.Error != nil || s.Id != "good" || s.Winner != pb.Winner_WINNER_ALICE {
				return fmt.Errorf("%s: the good problem next to the bad one: %s", rpc, show(s))
			}
		}
		bad := solutions[1]
		if bad.Id != wantId || bad.Error == nil {
			return fmt.Errorf("%s: want id %q and an error, got %s", rpc, wantId, show(bad))
		}
		if err := sameError(rpc+"'s Solution.error", bad.Error, c.want); err != nil {
			return err
		}
	}
	return nil
}

// sameError compares everything but the message, which must merely be present.
func sameError(where string, got, want *pb.SolutionError) error {
	if got.Message == "" {
		return fmt.Errorf("%s: empty message: %s", where, show(got))
	}
	withoutMessage := proto.CloneOf(got)
	withoutMessage.Message = ""
	if !proto.Equal(withoutMessage, want) {
		return fmt.Errorf("%s:\n  got  %s\n  want %s (message aside)", where, show(got), show(want))
	}
	return nil
}

// solutionErrorOf reads a failed call's google.rpc.Status with the Go module's richerror,
// which refuses details that break AIP-193, and asks what the contract promises of a bad
// problem: an ErrorInfo, and a BadRequest (if any) with one described field violation.
// The result is what a batch would carry in Solution.error.
func solutionErrorOf(callErr error) (*pb.SolutionError, error) {
	rich, err := richerror.Parse(callErr)
	if err != nil {
		return nil, err
	}
	if rich.Info == nil {
		return nil, fmt.Errorf("no ErrorInfo (status %v)", rich.Status)
	}
	if rich.BadRequest != nil {
		if v := rich.BadRequest.GetFieldViolations(); len(v) != 1 || v[0].GetDescription() == "" {
			return nil, fmt.Errorf("want one described field violation, got %s", show(rich.BadRequest))
		}
	}
	return rich.SolutionError(), nil
}

// checkMessageLimit expects a server started with --max-message-bytes limit: a request
// under the limit is answered and one over it fails with RESOURCE_EXHAUSTED, on a unary
// and on a streaming call.
func checkMessageLimit(client pb.GameSolverServiceClient, limit int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	sum := func(length int) *pb.Problem {
		return &pb.Problem{Game: &pb.Problem_SumGame{SumGame: &pb.SumGame{Num: strings.Repeat("7", length)}}}
	}
	if _, err := client.Solve(ctx, &pb.SolveRequest{Problem: sum(limit / 2)}); err != nil {
		return "", fmt.Errorf("Solve under the %d-byte limit: %w", limit, err)
	}
	if _, err := client.Solve(ctx, &pb.SolveRequest{Problem: sum(2 * limit)}); status.Code(err) != codes.ResourceExhausted {
		return "", fmt.Errorf("Solve over the %d-byte limit: want ResourceExhausted, got %v", limit, err)
	}
	over := []*pb.SolveStreamRequest{{Problem: sum(2)}, {Problem: sum(2 * limit)}}
	if _, err := solveStream(ctx, client, over, streamWindow); status.Code(err) != codes.ResourceExhausted {
		return "", fmt.Errorf("SolveStream over the %d-byte limit: want ResourceExhausted, got %v", limit, err)
	}
	return fmt.Sprintf("--max-message-bytes %d: Solve and SolveStream over it get RESOURCE_EXHAUSTED", limit), nil
}

// checkDeadline expects a cold server started with --request-timeout 0.05: a pile of 5·10^7
// makes the Stone Game IV table grow for half a second (and no longer, so that the check
// leaves no CPU-bound work behind), so that Solve must fail with DEADLINE_EXCEEDED from the
// server (the client sets no deadline shorter than a minute, and the message names the
// server's timeout); small problems are answered before and after.
func checkDeadline(client pb.GameSolverServiceClient) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	small := &pb.SolveRequest{Problem: &pb.Problem{Game: &pb.Problem_SumGame{SumGame: &pb.SumGame{Num: "25??"}}}}
	if _, err := client.Solve(ctx, small); err != nil {
		return "", fmt.Errorf("Solve of a small problem: %w", err)
	}
	slow := &pb.SolveRequest{Problem: &pb.Problem{
		Game: &pb.Problem_StoneGameIv{StoneGameIv: &pb.StoneGameIv{N: 50_000_000}},
	}}
	start := time.Now()
	resp, err := client.Solve(ctx, slow)
	elapsed := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		return "", fmt.Errorf("Solve of a 5·10^7 pile on a cold server: want DeadlineExceeded, got %v %s after %v",
			err, show(resp), elapsed)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "request timeout") {
		return "", fmt.Errorf("DeadlineExceeded did not come from the server's timeout: %q", msg)
	}
	if _, err := client.Solve(ctx, small); err != nil {
		return "", fmt.Errorf("Solve of a small problem after the timeout: %w", err)
	}
	return fmt.Sprintf("--request-timeout 0.05: a 5·10^7 pile gets DEADLINE_EXCEEDED after %v", elapsed.Round(time.Millisecond)), nil
}

// checkPipeline sends many small requests on one SolveStream without waiting for any
// response, as a plain grpc-go client of a bidirectional stream does: however fast the
// client sends, the server must answer every one, in order, or hold the client back with
// flow control, never fail the call.
func checkPipeline(client pb.GameSolverServiceClient) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	requests := make([]*pb.SolveStreamRequest, pipelineRequests)
	for i := range requests {
		requests[i] = &pb.SolveStreamRequest{Problem: &pb.Problem{
			Id: strconv.Itoa(i), Game: &pb.Problem_StoneGameIv{StoneGameIv: &pb.StoneGameIv{N: uint64(i % 1000)}},
		}}
	}
	responses, err := solveStream(ctx, client, requests, len(requests))
	if err != nil {
		return "", fmt.Errorf("SolveStream of %d small requests sent without a window: %d answered, then %w",
			len(requests), len(responses), err)
	}
	if len(responses) != len(requests) {
		return "", fmt.Errorf("SolveStream: %d responses for %d requests", len(responses), len(requests))
	}
	for i, r := range responses {
		if r.Solution.GetId() != requests[i].Problem.Id || r.Solution.GetError() != nil {
			return "", fmt.Errorf("SolveStream response %d: %s", i, show(r))
		}
	}
	return fmt.Sprintf("SolveStream: %d small requests sent without waiting are all answered, in order",
		len(requests)), nil
}

// solveStream runs one SolveStream call over requests, at most window of them unanswered.
func solveStream(ctx context.Context, client pb.GameSolverServiceClient, requests []*pb.SolveStreamRequest, window int) ([]*pb.SolveStreamResponse, error) {
	stream, err := client.SolveStream(ctx)
	if err != nil {
		return nil, err
	}
	return exchange(stream, requests, window)
}

// solveBatchStream runs one SolveBatchStream call over requests, at most window of them
// unanswered.
func solveBatchStream(ctx context.Context, client pb.GameSolverServiceClient, requests []*pb.SolveBatchStreamRequest, window int) ([]*pb.SolveBatchStreamResponse, error) {
	stream, err := client.SolveBatchStream(ctx)
	if err != nil {
		return nil, err
	}
	return exchange(stream, requests, window)
}

// exchange sends the requests while it receives the responses (one per request), with at
// most window requests unanswered, and returns the responses and the call's error.
func exchange[Req, Resp any](stream grpc.BidiStreamingClient[Req, Resp], requests []*Req, window int) ([]*Resp, error) {
	credits := make(chan struct{}, window)
	sent := make(chan error, 1)
	go func() {
		for _, r := range requests {
			select {
			case credits <- struct{}{}:
			case <-stream.Context().Done():
				sent <- stream.Context().Err()
				return
			}
			if err := stream.Send(r); err != nil {
				sent <- err // io.EOF: the server ended the call, and Recv says why
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	var responses []*Resp
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return responses, err
		}
		responses = append(responses, resp)
		select {
		case <-credits:
		default: // more responses than requests: the caller's count check reports it
		}
	}
	if err := <-sent; err != nil && !errors.Is(err, io.EOF) {
		return responses, err
	}
	return responses, nil
}

// show renders a message for an error message.
func show(m proto.Message) string {
	if m == nil {
		return "<nil>"
	}
	return protojson.MarshalOptions{}.Format(m)
}
