"""The randomness source: bit-level properties, speed, reproducibility and the test hooks."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from pinqpy import testing
from pinqpy.noise import source as _noise
from pinqpy.noise.source import (
    RandomSource,
    SecureSource,
    SeededSource,
    current_source,
    gaussian_noise,
    gumbel_noise,
    laplace_noise,
    noise_disabled,
)

TWO53 = 2.0**53


@pytest.fixture(autouse=True)
def _clean_state():
    testing.reset()
    yield
    testing.reset()


class _FixedWords(RandomSource):
    """A source that returns given words in order, to probe the extremes of the transforms."""

    def __init__(self, words: list[int]):
        self.words = list(words)

    def uint64(self, n):
        size = int(np.prod(n))
        out, self.words = self.words[:size], self.words[size:]
        return np.array(out, dtype=np.uint64).reshape(n)

    def bytes(self, n):
        return b"\0" * n


@pytest.mark.parametrize("source", [SecureSource(), SeededSource(3)], ids=repr)
def test_uniform_is_open_interval_with_53_bits(source: RandomSource):
    u = source.uniform(100_000)
    assert u.dtype == np.float64 and u.shape == (100_000,)
    assert (u > 0).all() and (u < 1).all()
    # Every value is k·2^-53 for an integer k in [1, 2^53): 53 random bits, exactly.
    k = u * TWO53
    assert np.array_equal(k, np.floor(k))
    assert k.min() >= 1 and k.max() <= TWO53 - 1
    # The lowest bit is random too (it would be constant if the grid were coarser).
    assert 0.48 < (k % 2 == 1).mean() < 0.52


def test_shapes_are_respected():
    src = SeededSource(0)
    assert src.uniform((3, 4)).shape == (3, 4)
    assert src.laplace((2, 5), 1.0).shape == (2, 5)
    assert src.gaussian((3, 3), 1.0).shape == (3, 3)
    assert src.gaussian(7, 1.0).shape == (7,)  # odd sizes: Box-Muller pairs are trimmed
    assert src.gumbel((4, 2)).shape == (4, 2)
    assert src.uint64(5).dtype == np.uint64
    assert len(src.bytes(13)) == 13
    assert SecureSource().uint64((2, 3)).shape == (2, 3)
    assert len(SecureSource().bytes(9)) == 9
    assert src.uniform(0).shape == (0,)


def test_extreme_words_give_finite_samples():
    # The largest words map to 1 - 2^-53, the smallest non-zero to 2^-53: never 0 or 1.
    words = [1 << 11, 2**64 - 1, 2**63, (2**53 - 2**52) << 11]
    u = _FixedWords(words).uniform(4)
    assert u.tolist() == [2.0**-53, 1 - 2.0**-53, 0.5, 0.5]
    for draw in ("laplace", "gaussian", "gumbel"):
        src = _FixedWords(words * 2)
        x = src.gumbel(4) if draw == "gumbel" else getattr(src, draw)(4, 2.0)
        assert np.isfinite(x).all()
    # Laplace inversion is symmetric: k and 2^53 - k give opposite samples.
    lap = _FixedWords([1 << 11, (2**53 - 1) << 11]).laplace(2, 1.0)
    assert lap[0] == -lap[1]


def test_zero_words_are_redrawn():
    src = _FixedWords([0, 5 << 11, 0, 7 << 11])
    assert (src.uniform(2) * TWO53).tolist() == [7.0, 5.0]


def test_secure_source_draws_all_bytes_in_one_call(monkeypatch):
    calls: list[int] = []
    real = os.urandom

    def counting(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(_noise.os, "urandom", counting)
    SecureSource().uniform(1000)
    assert calls == [8000]


def test_secure_source_is_fast():
    src = SecureSource()
    src.uniform(10)
    start = time.perf_counter()
    u = src.laplace(1_000_000, 1.0)
    elapsed = time.perf_counter() - start
    assert u.shape == (1_000_000,)
    # Tens of milliseconds on a slow machine; a Python loop per sample takes seconds.
    assert elapsed < 0.5


def test_secure_source_differs_between_calls():
    src = SecureSource()
    assert not np.array_equal(src.uint64(4), src.uint64(4))


def test_seeded_source_is_reproducible():
    a, b, c = SeededSource(5), SeededSource(5), SeededSource(6)
    assert np.array_equal(a.uniform(10), b.uniform(10))
    assert np.array_equal(a.laplace(10, 1.0), b.laplace(10, 1.0))
    assert not np.array_equal(SeededSource(5).uniform(10), c.uniform(10))
    assert a.bytes(8) == b.bytes(8)


def test_default_source_is_secure():
    assert isinstance(current_source(), SecureSource)
    assert not noise_disabled()


def test_seed_as_plain_call_until_reset():
    testing.seed(11)
    x = laplace_noise(5, 1.0)
    testing.seed(11)
    y = laplace_noise(5, 1.0)
    assert np.array_equal(x, y)
    assert isinstance(current_source(), SeededSource)
    testing.reset()
    assert isinstance(current_source(), SecureSource)


def test_seed_as_context_manager_restores():
    before = current_source()
    with testing.seed(7) as s:
        assert isinstance(current_source(), SeededSource)
        assert s.value == 7
        a = gaussian_noise(4, 1.0)
        with testing.seed(8):
            assert current_source().seed == 8
        assert current_source().seed == 7
    assert current_source() is before
    with testing.seed(7):
        b = gaussian_noise(4, 1.0)
    assert np.array_equal(a, b)


def test_seed_rejects_non_integers():
    with pytest.raises(TypeError):
        testing.seed(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        testing.seed(True)


def test_no_noise_returns_zeros_and_restores():
    with testing.no_noise():
        assert noise_disabled()
        assert not laplace_noise(3, 2.0).any()
        assert not gaussian_noise((2, 2), 2.0).any()
        assert not gumbel_noise(3).any()
        with testing.no_noise():
            assert noise_disabled()
        assert noise_disabled()  # the inner block restores the outer setting
    assert not noise_disabled()
    assert laplace_noise(3, 2.0).any()


def test_no_noise_restores_after_an_exception():
    with pytest.raises(RuntimeError), testing.no_noise():
        raise RuntimeError
    assert not noise_disabled()


def test_reset_turns_noise_back_on():
    cm = testing.no_noise()
    cm.__enter__()
    assert noise_disabled()
    testing.reset()
    assert not noise_disabled()


def test_zero_scale_and_invalid_scales():
    assert not laplace_noise(4, 0.0).any()
    assert not gaussian_noise(4, 0.0).any()
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            laplace_noise(2, bad)
        with pytest.raises(ValueError):
            gaussian_noise(2, bad)


def test_set_source_rejects_non_sources():
    with pytest.raises(TypeError):
        _noise._set_source(object())  # type: ignore[arg-type]


def test_concurrent_draws_from_a_seeded_source():
    # The generator is shared; draws are serialized, so every thread gets whole samples.
    testing.seed(1)
    out: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                out.append(laplace_noise(100, 1.0))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(out) == 200 and all(np.isfinite(x).all() and x.shape == (100,) for x in out)
