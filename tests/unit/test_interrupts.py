"""The interrupt state: when a signal raises, when it only asks the running loop to stop."""

from __future__ import annotations

import signal

import pytest

from harness.run.interrupts import Interrupts


def test_a_signal_outside_a_deferred_section_raises_at_once():
    interrupts = Interrupts()
    with pytest.raises(KeyboardInterrupt):
        interrupts._handle(signal.SIGINT, None)
    assert interrupts.stop.is_set() and interrupts.exit_code == 130


def test_inside_a_deferred_section_it_only_sets_stop_then_raises_when_asked():
    interrupts = Interrupts()
    with interrupts.deferred() as stop:
        interrupts._handle(signal.SIGTERM, None)  # no raise inside the producer's poll
        assert stop.is_set()
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_if_stopped()
    assert interrupts.exit_code == 143


def test_a_second_signal_never_raises_so_the_cleanup_completes(capsys):
    interrupts = Interrupts()
    with pytest.raises(KeyboardInterrupt):
        interrupts._handle(signal.SIGINT, None)
    interrupts._handle(signal.SIGINT, None)
    interrupts._handle(signal.SIGTERM, None)
    assert "still cleaning up" in capsys.readouterr().err
    assert interrupts.exit_code == 130  # the first signal decides the exit code


def test_nothing_raises_without_a_signal():
    interrupts = Interrupts()
    interrupts.raise_if_stopped()
    assert not interrupts.stop.is_set()


def test_install_handles_an_inherited_ignored_sigint_and_restore_puts_it_back():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupts = Interrupts()
        previous = interrupts.install()
        assert signal.getsignal(signal.SIGINT) == interrupts._handle
        interrupts.restore(previous)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
