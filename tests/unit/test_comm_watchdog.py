"""The collective watchdog's setting (issue 38); its behaviour under mpiexec: tests/faults/test_hangs.py."""

import pytest

from spgnn.comm import run_loopback
from spgnn.comm import watchdog


@pytest.mark.parametrize("value,seconds", [(None, 0.0), (0, 0.0), ("2", 2.0), (0.5, 0.5)])
def test_check_timeout_accepts_seconds(value, seconds):
    assert watchdog.check_timeout(value) == seconds


@pytest.mark.parametrize("value", [-1, "nan", "inf", "soon", True, [1]])
def test_check_timeout_refuses_what_is_not_seconds(value):
    with pytest.raises(ValueError, match="collective_timeout must be a number of seconds"):
        watchdog.check_timeout(value)


def test_environment_variable_and_default(monkeypatch):
    monkeypatch.delenv(watchdog.ENV, raising=False)
    assert watchdog.env_timeout() == watchdog.DEFAULT_TIMEOUT
    monkeypatch.setenv(watchdog.ENV, "0")
    assert watchdog.env_timeout() == 0.0
    monkeypatch.setenv(watchdog.ENV, "-3")
    with pytest.raises(ValueError, match="SPGNN_COLLECTIVE_TIMEOUT"):
        watchdog.env_timeout()


def test_communicator_setting_is_inherited_by_splits(monkeypatch):
    monkeypatch.setenv(watchdog.ENV, "42")

    def body(comm):
        assert comm.collective_timeout == 42.0
        comm.collective_timeout = 7
        sub = comm.split(comm.rank % 2)
        return sub.collective_timeout, sub._watch

    assert run_loopback(2, body, timeout=30) == [(7.0, None)] * 2
