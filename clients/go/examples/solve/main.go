// Command solve asks a gamesolver server for one answer and prints the winner and move.
//
//	go run ./examples/solve [-server 127.0.0.1:50051] [-num 25??]
//
// The problem is a Sum Game; a bad string such as 12x4 shows the rich error details.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	gamesolverv1 "github.com/gamesolver/gamesolver/gen/go/gamesolver/v1"
	"github.com/gamesolver/gamesolver/gen/go/richerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	log.SetFlags(0)
	server := flag.String("server", "127.0.0.1:50051", "the server's address (plaintext)")
	num := flag.String("num", "25??", "the Sum Game string: digits and '?', even length")
	flag.Parse()

	conn, err := grpc.NewClient(*server, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := gamesolverv1.NewGameSolverServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	problem := &gamesolverv1.Problem{
		Id:   "example",
		Game: &gamesolverv1.Problem_SumGame{SumGame: &gamesolverv1.SumGame{Num: *num}},
	}
	resp, err := client.Solve(ctx, &gamesolverv1.SolveRequest{Problem: problem})
	if err != nil {
		rich, parseErr := richerror.Parse(err)
		if parseErr != nil {
			log.Fatalf("solve: %v", err)
		}
		log.Fatalf("solve: %v, metadata %v", rich, rich.Metadata())
	}
	solution := resp.GetSolution()
	fmt.Println("winner:", solution.GetWinner())
	if move := solution.GetWinningMove().GetSumGame(); move != nil {
		fmt.Printf("move: write %d at index %d\n", move.GetDigit(), move.GetIndex())
	}
}
