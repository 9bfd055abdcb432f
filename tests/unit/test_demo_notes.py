"""The demo explains an interval as wide as the bounds, and says nothing of a narrower one."""

from __future__ import annotations

import numpy as np
import pytest

from pinqpy import demo
from pinqpy.results.accuracy import AdditiveAccuracy
from pinqpy.results.noise import LaplaceNoise
from pinqpy.results.values import NoisyValue


def _value(v: float, scale: float) -> NoisyValue:
    return NoisyValue.from_release(AdditiveAccuracy(np.array([v]), LaplaceNoise(scale), epsilon=1))


@pytest.mark.parametrize(
    ("scale", "said"), [(1000.0, True), (1.0, False)]  # ± 2996 covers [0, 100]; ± 3 does not
)
def test_show_says_when_the_interval_is_the_whole_range(
    capsys: pytest.CaptureFixture[str], scale: float, said: bool
) -> None:
    demo._show("mean age", _value(50.0, scale), (0, 100))
    line = capsys.readouterr().out
    assert (demo.WHOLE_RANGE in line) is said
    demo._show("mean age", _value(50.0, scale))  # no bounds known: nothing to say
    assert demo.WHOLE_RANGE not in capsys.readouterr().out
