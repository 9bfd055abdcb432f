"""What a noisy argmax returns: the chosen candidate itself (:class:`NoisyLabel` for a ``str``,
or a result of the candidate's own type) whose ``ci`` says how far below the true maximum count
the chosen candidate's count can be.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from pinqpy.results.accuracy import Accuracy
from pinqpy.results.html import LEVEL, noisy_scalar_html, result_html
from pinqpy.results.values import _HasAccuracy, _one_key

__all__ = ["NoisyChoice", "NoisyFloatLabel", "NoisyIntLabel", "NoisyLabel"]


class _LabelType(type):
    """``isinstance(x, NoisyLabel)`` holds for every argmax result, whatever its candidate's
    type (a ``str`` subclass for strings, an ``int`` or ``float`` subclass for numbers, a
    :class:`NoisyChoice` wrapper otherwise)."""

    def __instancecheck__(cls, obj: object) -> bool:
        if cls is NoisyLabel and isinstance(obj, _Label):
            return True
        return type.__instancecheck__(cls, obj)


class _Label(_HasAccuracy):
    """What every argmax result has: ``candidate``, ``ci(level)``, a repr and pickling."""

    candidate: Any

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_scalar_html(self, level, label=True)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """``(0.0, tolerance)``: how far below the maximum count the choice's count can be."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        return f"NoisyLabel({self.candidate!r}, mechanism={self.mechanism!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyLabel, (self.candidate, self._accuracy))


def _is_int_candidate(c: object) -> bool:
    return type(c) is int or isinstance(c, np.integer)


def _is_float_candidate(c: object) -> bool:
    return type(c) is float or isinstance(c, np.floating)


class NoisyLabel(_Label, str, metaclass=_LabelType):
    """The candidate a noisy argmax chose, *itself*, with the argmax's accuracy.

    ``NoisyLabel(candidate, accuracy)`` returns a result of the candidate's own type, so it
    compares equal to (and hashes like) the candidate:

    * a ``str`` candidate gives a ``NoisyLabel``, a ``str`` subclass;
    * an ``int`` (or numpy integer) gives a :class:`NoisyIntLabel`, an ``int`` subclass;
    * a ``float`` (or numpy float) gives a :class:`NoisyFloatLabel`, a ``float`` subclass;
    * anything else (``bool``, which cannot be subclassed, tuples, ``None``, dates, ...) gives
      a :class:`NoisyChoice`, a wrapper whose ``==`` and ``hash`` are the candidate's.

    All of them pass ``isinstance(x, NoisyLabel)`` and have ``candidate`` (the original
    candidate object) and ``ci(level)``, which returns ``(0.0, tolerance)``: with probability
    at least ``level`` the chosen candidate's exact count is within ``tolerance`` below the
    largest exact count among the candidates.

    >>> import numpy as np
    >>> from pinqpy.results.accuracy import ArgmaxAccuracy
    >>> acc = ArgmaxAccuracy(np.array(["CA"], dtype=object), epsilon=1.0, n_candidates=3)
    >>> lab = NoisyLabel.from_release(acc)
    >>> lab == "CA", [round(x, 3) for x in lab.ci(0.95)]
    (True, [0.0, 4.094])
    >>> nine = NoisyLabel(9, acc)
    >>> nine == 9, type(nine).__name__, isinstance(nine, int), isinstance(nine, NoisyLabel)
    (True, 'NoisyIntLabel', True, True)
    """

    def __new__(cls, candidate: Hashable, accuracy: Accuracy) -> Any:
        if cls is NoisyLabel and not isinstance(candidate, str):
            if _is_int_candidate(candidate):
                return NoisyIntLabel(candidate, accuracy)
            if _is_float_candidate(candidate):
                return NoisyFloatLabel(candidate, accuracy)
            return NoisyChoice(candidate, accuracy)
        obj = str.__new__(cls, candidate)
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> Any:
        return NoisyLabel(_one_key(accuracy).values[0], accuracy)

    def __repr__(self) -> str:
        return f"NoisyLabel({str.__repr__(self)}, mechanism={self.mechanism!r})"


class NoisyIntLabel(_Label, int):
    """An argmax's chosen ``int`` candidate: an ``int`` equal to it, with the accuracy.

    See :class:`NoisyLabel`. Arithmetic returns plain ints.
    """

    def __new__(cls, candidate: Any, accuracy: Accuracy) -> NoisyIntLabel:
        obj = int.__new__(cls, int(candidate))
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    def __str__(self) -> str:
        return int.__repr__(self)


class NoisyFloatLabel(_Label, float):
    """An argmax's chosen ``float`` candidate: a ``float`` equal to it, with the accuracy.

    See :class:`NoisyLabel`. Arithmetic returns plain floats.
    """

    def __new__(cls, candidate: Any, accuracy: Accuracy) -> NoisyFloatLabel:
        obj = float.__new__(cls, float(candidate))
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    def __str__(self) -> str:
        return float.__repr__(self)


class NoisyChoice(_Label):
    """An argmax's chosen candidate of a type that cannot be subclassed (``bool``) or is not
    worth subclassing (tuples, ``None``, dates, ...): a wrapper that compares equal to the
    candidate and hashes like it, so ``choice == candidate`` and ``{candidate: 1}[choice]``
    work. ``candidate`` is the candidate itself; see :class:`NoisyLabel`.
    """

    __slots__ = ("_accuracy", "candidate")

    def __init__(self, candidate: Any, accuracy: Accuracy):
        self._accuracy = _one_key(accuracy)
        self.candidate = candidate

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NoisyChoice):
            other = other.candidate
        return bool(self.candidate == other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.candidate)

    def __bool__(self) -> bool:
        return bool(self.candidate)

    def __str__(self) -> str:
        return str(self.candidate)
