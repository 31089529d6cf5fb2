module github.com/gamesolver/gamesolver/tests/interop/go

go 1.26.0

require (
	github.com/gamesolver/gamesolver/gen/go v0.0.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
)

// The repository's Go module, as committed: the check uses the stubs users get.
replace github.com/gamesolver/gamesolver/gen/go => ../../../clients/go
