"""The ``calculate`` tool's arithmetic: upstream's ``eval`` of an expression, with bounded work.

Upstream runs ``eval(expression)`` on digits, ``+ - * /``, dots, parentheses and spaces. That is exact but
unbounded: ``9**9**7`` takes seconds, ``9**9**9`` never returns -- one tool call could stall a training run.
Here the expression is compiled exactly as ``eval`` compiles it (same syntax errors), then its tree is
evaluated with Python's own operators, in ``eval``'s order, so every value and every error text is
upstream's. Integers are the only values that can grow without bound; an operation whose integer result
would exceed :data:`MAX_INT_BITS`, or an expression whose integer results add up to more than
:data:`MAX_TOTAL_BITS`, stops with :class:`ExpressionTooLarge` (an ``Error: ...`` tool result) within
milliseconds, where upstream would either overflow ``float()`` anyway or run for seconds to forever.
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable, Union

CALC_CHARS = "0123456789+-*/(). "  # a str, as upstream: ``x in CALC_CHARS`` keeps its substring/type semantics
MAX_INT_BITS = 1 << 20  # ~315,000 digits: far above any float (1,024 bits)
MAX_TOTAL_BITS = 1 << 22

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}

Number = Union[int, float]


class _Spread:
    """A ``*x`` argument, unpacked into the call it is in."""

    def __init__(self, value: Any) -> None:
        self.value = value


class ExpressionTooLarge(ValueError):
    """An integer in the expression would grow past the documented bound."""


def _result_bits(op: type, a: Number, b: Number) -> int:
    """An upper bound on the bit length of ``a op b`` for two ints (0 when the result is not an int or small)."""
    if type(a) is not int or type(b) is not int:
        return 0
    la, lb = a.bit_length(), b.bit_length()
    if op is ast.Pow:
        if b < 0 or la <= 1:
            return 1  # a float, or a power of 0, 1 or -1
        return b * la
    if op is ast.Mult:
        return la + lb
    return max(la, lb) + 1


def evaluate(expression: str) -> Any:
    """The value ``eval(expression, {"__builtins__": None}, {})`` gives, for an arithmetic expression.

    Raises what ``eval`` raises (SyntaxError, ZeroDivisionError, OverflowError, ...) or ExpressionTooLarge.
    """
    if not isinstance(expression, str):  # e.g. a list of digit strings passes the character check
        return eval(expression, {"__builtins__": None}, {})
    expression = expression.lstrip(" \t")  # as eval does with a string source
    code = compile(expression, "<string>", "eval")  # eval's own compile step: its errors, exactly
    root = ast.parse(expression, "<string>", "eval").body
    kinds = {type(n) for n in ast.walk(root)}
    if kinds & {ast.Tuple, ast.Call, ast.Starred} and ast.Pow not in kinds:
        # ``()``, ``(1)(2)``, ``(1)(*())``: legal, and a TypeError when run; eval gives its exact text, and
        # with no power or product nothing can grow large
        if ast.Mult not in kinds:
            return eval(code, {"__builtins__": None}, {})
    total = 0
    values: list[Any] = []
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    while stack:  # post-order, left operand first (as the bytecode runs); iterative: long chains are flat
        node, ready = stack.pop()
        if isinstance(node, ast.Constant):
            values.append(node.value)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            if not ready:
                stack += [(node, True), (node.right, False), (node.left, False)]
                continue
            b = values.pop()
            a = values.pop()
            bits = _result_bits(type(node.op), a, b)
            total += bits
            if bits > MAX_INT_BITS or total > MAX_TOTAL_BITS:
                raise ExpressionTooLarge(
                    f"expression too large to evaluate: integers are limited to {MAX_INT_BITS:,} bits"
                )
            values.append(_BINARY[type(node.op)](a, b))
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            if not ready:
                stack += [(node, True), (node.operand, False)]
                continue
            values.append(_UNARY[type(node.op)](values.pop()))
        elif isinstance(node, (ast.Tuple, ast.Call, ast.Starred)):
            # the same TypeErrors, next to a power or a product
            parts = (
                [node.func, *node.args]
                if isinstance(node, ast.Call)
                else (node.elts if isinstance(node, ast.Tuple) else [node.value])
            )
            if not ready:
                stack.append((node, True))
                stack += [(p, False) for p in reversed(parts)]
                continue
            got = values[len(values) - len(parts) :]
            del values[len(values) - len(parts) :]
            if isinstance(node, ast.Starred):
                values.append(_Spread(got[0]))
            elif isinstance(node, ast.Tuple):
                values.append(tuple(got))
            else:
                if len(got) == 2 and isinstance(got[1], _Spread):
                    values.append(got[0](*got[1].value))  # Python's own message for a bad ``*x``
                else:
                    values.append(got[0](*[x for a in got[1:] for x in (a.value if isinstance(a, _Spread) else (a,))]))
        else:  # pragma: no cover - screened above
            raise ValueError(f"unsupported expression: {type(node).__name__}")
    return values[0]


def calculate(expression: str) -> str:
    """Upstream's ``calculate`` tool body: character check, evaluation, ``round(float(...), 2)`` as text."""
    if not all(char in CALC_CHARS for char in expression):
        raise ValueError("Invalid characters in expression")
    return str(round(float(evaluate(expression)), 2))
