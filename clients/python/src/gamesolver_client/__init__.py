"""Helpers for clients of the gamesolver gRPC service.

The stubs themselves are the generated ``gamesolver.v1`` package (``gamesolver_pb2`` and
``gamesolver_pb2_grpc``); :mod:`gamesolver_client.richerror` reads the error details that
the service attaches to a failed call; :mod:`gamesolver_client.flight` (with the
``flight`` extra: pyarrow) solves Arrow tables and record batches through the Flight door,
failing over between servers, for pyarrow, Spark and Ray jobs.
"""
