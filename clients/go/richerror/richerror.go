// Package richerror reads the error details that gamesolver attaches to a failed call.
//
// The service follows AIP-193: a failed Solve carries a google.rpc.Status with one
// ErrorInfo (a stable reason in the domain "gamesolver.v1" and the dynamic values in its
// metadata) and, for bad input, one BadRequest field violation. A problem that fails
// inside SolveBatch or a stream carries the same code, reason, field and metadata in its
// Solution.error instead; SolutionError converts the one into the other, so a caller can
// handle both the same way.
package richerror

import (
	"errors"
	"fmt"

	gamesolverv1 "github.com/gamesolver/gamesolver/gen/go/gamesolver/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Domain is ErrorInfo.domain for every error of the service.
const Domain = "gamesolver.v1"

// Error is a failed call's status with its details decoded.
type Error struct {
	// Status is the call's gRPC status: its code and its human-readable message.
	Status *status.Status
	// Info holds the stable reason and the metadata; nil when the failure did not come
	// from the service (a deadline the client set, a connection refused).
	Info *errdetails.ErrorInfo
	// BadRequest names the offending request field; nil when no field is to blame.
	BadRequest *errdetails.BadRequest
}

// Parse decodes err's details. It fails when err is not a gRPC status, or when the
// details break the contract: one that cannot be decoded, more than one ErrorInfo or
// BadRequest, an ErrorInfo of another domain, or more than one field violation.
func Parse(err error) (*Error, error) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil, fmt.Errorf("not a gRPC status: %w", err)
	}
	parsed := &Error{Status: st}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			if parsed.Info != nil {
				return nil, errors.New("more than one ErrorInfo")
			}
			if d.GetDomain() != Domain {
				return nil, fmt.Errorf("ErrorInfo of domain %q, not %q", d.GetDomain(), Domain)
			}
			parsed.Info = d
		case *errdetails.BadRequest:
			if parsed.BadRequest != nil {
				return nil, errors.New("more than one BadRequest")
			}
			if n := len(d.GetFieldViolations()); n > 1 {
				return nil, fmt.Errorf("%d field violations, at most 1 expected", n)
			}
			parsed.BadRequest = d
		case error:
			return nil, fmt.Errorf("undecodable status detail: %w", d)
		default:
			return nil, fmt.Errorf("unexpected status detail %T", d)
		}
	}
	return parsed, nil
}

// Reason is ErrorInfo.reason, such as "INVALID_CHARACTER"; empty without an ErrorInfo.
func (e *Error) Reason() string { return e.Info.GetReason() }

// Metadata is ErrorInfo.metadata, such as {"index": "2", "character": "x"}.
func (e *Error) Metadata() map[string]string { return e.Info.GetMetadata() }

// Field is the offending field, such as "problem.sum_game.num"; empty when none is.
func (e *Error) Field() string {
	if v := e.BadRequest.GetFieldViolations(); len(v) == 1 {
		return v[0].GetField()
	}
	return ""
}

// SolutionError is the same error as SolveBatch or a stream carries it in Solution.error.
func (e *Error) SolutionError() *gamesolverv1.SolutionError {
	return &gamesolverv1.SolutionError{
		Code:     gamesolverv1.SolutionError_Code(e.Status.Code()),
		Message:  e.Status.Message(),
		Reason:   e.Reason(),
		Field:    e.Field(),
		Metadata: e.Metadata(),
	}
}

// Error says what failed, with the reason and the field when there are.
func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Status.Code(), e.Status.Message())
	if r := e.Reason(); r != "" {
		msg += fmt.Sprintf(" (reason %s", r)
		if f := e.Field(); f != "" {
			msg += ", field " + f
		}
		msg += ")"
	}
	return msg
}
