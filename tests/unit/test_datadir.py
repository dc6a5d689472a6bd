"""The data dir's lock and bound-listeners record: what a refused or misconfigured broker tells its user."""

from __future__ import annotations

import os
import socket

import pytest

from odradek.broker import datadir
from odradek.broker.config import Config
from odradek.broker.datadir import DataDirError, DirLock
from odradek.broker.health import local_bootstrap


def test_second_holder_is_told_which_host_holds_the_dir(tmp_path, monkeypatch):
    # a container's hostname is its id: the pid alone ("pid 1") means nothing outside it
    monkeypatch.setattr(socket, "gethostname", lambda: "c0ffee123456")
    first = DirLock(tmp_path)
    first.acquire()
    try:
        monkeypatch.setattr(socket, "gethostname", lambda: "another-box")
        with pytest.raises(DataDirError) as err:
            DirLock(tmp_path).acquire()
        message = str(err.value)
        assert "in use by another broker" in message
        assert "c0ffee123456" in message and f"pid {os.getpid()}" in message
    finally:
        first.release()


def test_lock_written_by_an_older_version_still_names_its_pid(tmp_path):
    assert datadir.parse_holder("123\n") == {"pid": "123"}
    assert datadir.parse_holder("pid=1 host=abc\n") == {"pid": "1", "host": "abc"}


def test_unwritable_data_dir_says_to_chown_it(tmp_path, monkeypatch):
    """A root-owned bind mount (the image runs as 10001): say what to do, not just EACCES.
    The tests run as root, who may write anywhere, so the refusal is simulated here; the
    container tests bind-mount a real root-owned directory."""
    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(datadir.os, "open", refuse)
    with pytest.raises(DataDirError) as err:
        DirLock(tmp_path).acquire()
    message = str(err.value)
    assert "not writable" in message and str(tmp_path) in message
    assert f"chown -R {os.getuid()}:{os.getgid()}" in message


def test_health_probes_the_recorded_listener_before_the_configured_one(tmp_path):
    config = Config.load(None, overrides=[f"log.dirs={tmp_path}", "listeners=PLAINTEXT://0.0.0.0:9092"],
                         environ={})
    assert local_bootstrap(config) == "127.0.0.1:9092"
    datadir.write_bound(tmp_path, [("0.0.0.0", 9093)])
    assert local_bootstrap(config) == "127.0.0.1:9093"
    datadir.clear_bound(tmp_path)
    assert local_bootstrap(config) == "127.0.0.1:9092"


def test_a_data_dir_of_ours_without_write_permission_says_chmod_not_chown(tmp_path, monkeypatch):
    """Mode 0555 on our own directory: chown would change nothing (root may write anyway, so the
    refusal is simulated)."""
    monkeypatch.setattr(datadir.os, "access", lambda *a, **k: False)
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(DataDirError) as err:
            datadir.prepare_data_dir(tmp_path)
    finally:
        tmp_path.chmod(0o755)
    message = str(err.value)
    assert "read-only (mode 555)" in message and f"chmod u+w {tmp_path}" in message and "chown" not in message
    assert "log.dirs" in message
