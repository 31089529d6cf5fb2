from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Winner(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WINNER_UNSPECIFIED: _ClassVar[Winner]
    WINNER_ALICE: _ClassVar[Winner]
    WINNER_BOB: _ClassVar[Winner]
WINNER_UNSPECIFIED: Winner
WINNER_ALICE: Winner
WINNER_BOB: Winner

class SolveRequest(_message.Message):
    __slots__ = ("problem", "winner_only")
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    WINNER_ONLY_FIELD_NUMBER: _ClassVar[int]
    problem: Problem
    winner_only: bool
    def __init__(self, problem: _Optional[_Union[Problem, _Mapping]] = ..., winner_only: _Optional[bool] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("solution",)
    SOLUTION_FIELD_NUMBER: _ClassVar[int]
    solution: Solution
    def __init__(self, solution: _Optional[_Union[Solution, _Mapping]] = ...) -> None: ...

class SolveBatchRequest(_message.Message):
    __slots__ = ("problems", "winner_only")
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    WINNER_ONLY_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedCompositeFieldContainer[Problem]
    winner_only: bool
    def __init__(self, problems: _Optional[_Iterable[_Union[Problem, _Mapping]]] = ..., winner_only: _Optional[bool] = ...) -> None: ...

class SolveBatchResponse(_message.Message):
    __slots__ = ("solutions",)
    SOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    solutions: _containers.RepeatedCompositeFieldContainer[Solution]
    def __init__(self, solutions: _Optional[_Iterable[_Union[Solution, _Mapping]]] = ...) -> None: ...

class SolveStreamRequest(_message.Message):
    __slots__ = ("problem", "winner_only")
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    WINNER_ONLY_FIELD_NUMBER: _ClassVar[int]
    problem: Problem
    winner_only: bool
    def __init__(self, problem: _Optional[_Union[Problem, _Mapping]] = ..., winner_only: _Optional[bool] = ...) -> None: ...

class SolveStreamResponse(_message.Message):
    __slots__ = ("solution",)
    SOLUTION_FIELD_NUMBER: _ClassVar[int]
    solution: Solution
    def __init__(self, solution: _Optional[_Union[Solution, _Mapping]] = ...) -> None: ...

class SolveBatchStreamRequest(_message.Message):
    __slots__ = ("problems", "winner_only")
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    WINNER_ONLY_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedCompositeFieldContainer[Problem]
    winner_only: bool
    def __init__(self, problems: _Optional[_Iterable[_Union[Problem, _Mapping]]] = ..., winner_only: _Optional[bool] = ...) -> None: ...

class SolveBatchStreamResponse(_message.Message):
    __slots__ = ("solutions",)
    SOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    solutions: _containers.RepeatedCompositeFieldContainer[Solution]
    def __init__(self, solutions: _Optional[_Iterable[_Union[Solution, _Mapping]]] = ...) -> None: ...

class Problem(_message.Message):
    __slots__ = ("id", "sum_game", "stone_game_ix", "stone_game_iv", "nim_square")
    ID_FIELD_NUMBER: _ClassVar[int]
    SUM_GAME_FIELD_NUMBER: _ClassVar[int]
    STONE_GAME_IX_FIELD_NUMBER: _ClassVar[int]
    STONE_GAME_IV_FIELD_NUMBER: _ClassVar[int]
    NIM_SQUARE_FIELD_NUMBER: _ClassVar[int]
    id: str
    sum_game: SumGame
    stone_game_ix: StoneGameIx
    stone_game_iv: StoneGameIv
    nim_square: NimSquare
    def __init__(self, id: _Optional[str] = ..., sum_game: _Optional[_Union[SumGame, _Mapping]] = ..., stone_game_ix: _Optional[_Union[StoneGameIx, _Mapping]] = ..., stone_game_iv: _Optional[_Union[StoneGameIv, _Mapping]] = ..., nim_square: _Optional[_Union[NimSquare, _Mapping]] = ...) -> None: ...

class SumGame(_message.Message):
    __slots__ = ("num",)
    NUM_FIELD_NUMBER: _ClassVar[int]
    num: str
    def __init__(self, num: _Optional[str] = ...) -> None: ...

class StoneGameIx(_message.Message):
    __slots__ = ("stones",)
    STONES_FIELD_NUMBER: _ClassVar[int]
    stones: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, stones: _Optional[_Iterable[int]] = ...) -> None: ...

class StoneGameIv(_message.Message):
    __slots__ = ("n",)
    N_FIELD_NUMBER: _ClassVar[int]
    n: int
    def __init__(self, n: _Optional[int] = ...) -> None: ...

class NimSquare(_message.Message):
    __slots__ = ("piles",)
    PILES_FIELD_NUMBER: _ClassVar[int]
    piles: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, piles: _Optional[_Iterable[int]] = ...) -> None: ...

class Solution(_message.Message):
    __slots__ = ("id", "alice_wins", "winner", "winning_move", "error", "nim_value")
    ID_FIELD_NUMBER: _ClassVar[int]
    ALICE_WINS_FIELD_NUMBER: _ClassVar[int]
    WINNER_FIELD_NUMBER: _ClassVar[int]
    WINNING_MOVE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NIM_VALUE_FIELD_NUMBER: _ClassVar[int]
    id: str
    alice_wins: bool
    winner: Winner
    winning_move: Move
    error: SolutionError
    nim_value: int
    def __init__(self, id: _Optional[str] = ..., alice_wins: _Optional[bool] = ..., winner: _Optional[_Union[Winner, str]] = ..., winning_move: _Optional[_Union[Move, _Mapping]] = ..., error: _Optional[_Union[SolutionError, _Mapping]] = ..., nim_value: _Optional[int] = ...) -> None: ...

class Move(_message.Message):
    __slots__ = ("sum_game", "stone_game_ix", "stone_game_iv", "nim_square")
    SUM_GAME_FIELD_NUMBER: _ClassVar[int]
    STONE_GAME_IX_FIELD_NUMBER: _ClassVar[int]
    STONE_GAME_IV_FIELD_NUMBER: _ClassVar[int]
    NIM_SQUARE_FIELD_NUMBER: _ClassVar[int]
    sum_game: SumGameMove
    stone_game_ix: StoneGameIxMove
    stone_game_iv: StoneGameIvMove
    nim_square: NimSquareMove
    def __init__(self, sum_game: _Optional[_Union[SumGameMove, _Mapping]] = ..., stone_game_ix: _Optional[_Union[StoneGameIxMove, _Mapping]] = ..., stone_game_iv: _Optional[_Union[StoneGameIvMove, _Mapping]] = ..., nim_square: _Optional[_Union[NimSquareMove, _Mapping]] = ...) -> None: ...

class SumGameMove(_message.Message):
    __slots__ = ("index", "digit")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DIGIT_FIELD_NUMBER: _ClassVar[int]
    index: int
    digit: int
    def __init__(self, index: _Optional[int] = ..., digit: _Optional[int] = ...) -> None: ...

class StoneGameIxMove(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    def __init__(self, index: _Optional[int] = ...) -> None: ...

class StoneGameIvMove(_message.Message):
    __slots__ = ("take",)
    TAKE_FIELD_NUMBER: _ClassVar[int]
    take: int
    def __init__(self, take: _Optional[int] = ...) -> None: ...

class NimSquareMove(_message.Message):
    __slots__ = ("pile", "take")
    PILE_FIELD_NUMBER: _ClassVar[int]
    TAKE_FIELD_NUMBER: _ClassVar[int]
    pile: int
    take: int
    def __init__(self, pile: _Optional[int] = ..., take: _Optional[int] = ...) -> None: ...

class SolutionError(_message.Message):
    __slots__ = ("code", "message", "reason", "field", "metadata")
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CODE_UNSPECIFIED: _ClassVar[SolutionError.Code]
        CODE_CANCELLED: _ClassVar[SolutionError.Code]
        CODE_UNKNOWN: _ClassVar[SolutionError.Code]
        CODE_INVALID_ARGUMENT: _ClassVar[SolutionError.Code]
        CODE_DEADLINE_EXCEEDED: _ClassVar[SolutionError.Code]
        CODE_RESOURCE_EXHAUSTED: _ClassVar[SolutionError.Code]
        CODE_OUT_OF_RANGE: _ClassVar[SolutionError.Code]
        CODE_INTERNAL: _ClassVar[SolutionError.Code]
        CODE_UNAVAILABLE: _ClassVar[SolutionError.Code]
    CODE_UNSPECIFIED: SolutionError.Code
    CODE_CANCELLED: SolutionError.Code
    CODE_UNKNOWN: SolutionError.Code
    CODE_INVALID_ARGUMENT: SolutionError.Code
    CODE_DEADLINE_EXCEEDED: SolutionError.Code
    CODE_RESOURCE_EXHAUSTED: SolutionError.Code
    CODE_OUT_OF_RANGE: SolutionError.Code
    CODE_INTERNAL: SolutionError.Code
    CODE_UNAVAILABLE: SolutionError.Code
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: SolutionError.Code
    message: str
    reason: str
    field: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[_Union[SolutionError.Code, str]] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., field: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
