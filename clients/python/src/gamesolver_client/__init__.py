"""Helpers for clients of the gamesolver gRPC service.

The stubs themselves are the generated ``gamesolver.v1`` package (``gamesolver_pb2`` and
``gamesolver_pb2_grpc``); :mod:`gamesolver_client.richerror` reads the error details that
the service attaches to a failed call.
"""
