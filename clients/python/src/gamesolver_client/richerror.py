"""The AIP-193 details of a failed gamesolver call.

A failed Solve carries a google.rpc.Status with one ErrorInfo (a stable ``reason`` in the
domain ``gamesolver.v1`` and the dynamic values in its ``metadata``) and, for bad input,
one BadRequest field violation. A problem that fails inside SolveBatch or a stream carries
the same code, reason, field and metadata in its ``Solution.error`` instead;
:meth:`RichError.solution_error` converts the one into the other.
"""
from dataclasses import dataclass, field
from typing import Dict

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gamesolver.v1 import gamesolver_pb2

DOMAIN = "gamesolver.v1"
"""ErrorInfo.domain of every error of the service."""


class ContractError(ValueError):
    """A status whose details break the service's contract."""


@dataclass
class RichError:
    """A failed call's status with its details decoded."""

    code: grpc.StatusCode
    """The call's status code."""
    message: str
    """The human-readable message; not for parsing."""
    reason: str = ""
    """ErrorInfo.reason, such as ``INVALID_CHARACTER``; empty when the failure did not
    come from the service (a deadline the client set, a connection refused)."""
    metadata: Dict[str, str] = field(default_factory=dict)
    """ErrorInfo.metadata, such as ``{"index": "2", "character": "x"}``."""
    field: str = ""
    """The offending field, such as ``problem.sum_game.num``; empty when none is."""
    description: str = ""
    """The field violation's description."""

    def solution_error(self) -> gamesolver_pb2.SolutionError:
        """The same error as SolveBatch or a stream carries it in ``Solution.error``."""
        return gamesolver_pb2.SolutionError(
            code=self.code.value[0], message=self.message, reason=self.reason,
            field=self.field, metadata=self.metadata)

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.message}"
        if self.reason:
            text += f" (reason {self.reason}" + (f", field {self.field}" if self.field else "") + ")"
        return text


def parse(call: grpc.RpcError) -> RichError:
    """Decodes the details of the error a failed call raised.

    Raises :class:`ContractError` when the details break the contract: more than one
    ErrorInfo or BadRequest, an ErrorInfo of another domain, more than one field
    violation, or a detail of another type.
    """
    error = RichError(code=call.code(), message=call.details() or "")
    status = rpc_status.from_call(call)
    if status is None:
        return error
    info = bad_request = None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            if info is not None:
                raise ContractError("more than one ErrorInfo")
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            if bad_request is not None:
                raise ContractError("more than one BadRequest")
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
        else:
            raise ContractError(f"unexpected status detail {detail.type_url}")
    if info is not None:
        if info.domain != DOMAIN:
            raise ContractError(f"ErrorInfo of domain {info.domain!r}, not {DOMAIN!r}")
        error.reason, error.metadata = info.reason, dict(info.metadata)
    if bad_request is not None:
        violations = bad_request.field_violations
        if len(violations) > 1:
            raise ContractError(f"{len(violations)} field violations, at most 1 expected")
        if violations:
            error.field, error.description = violations[0].field, violations[0].description
    return error

