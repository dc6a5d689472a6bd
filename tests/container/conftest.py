"""One image per session, built by scripts/container.sh; each test gets an engine that removes
what the test started. Without an engine (and no way to install one) the tests skip, saying how
to run them, except under CI, where that is a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.container.engine import (
    HOW_TO_RUN,
    Engine,
    EngineMissing,
    build_image,
    find_engine,
    running_under_ci,
)

IMAGE = "localhost/odradek:test"


@pytest.fixture(scope="session")
def engine_exe() -> str:
    try:
        exe = find_engine()
    except EngineMissing as exc:
        if running_under_ci():
            pytest.fail(f"CI must run the container tests, but: {exc}", pytrace=False)
        pytest.skip(f"{exc}; {HOW_TO_RUN}")
    Engine(exe, "").sweep_orphans()  # what killed runs left behind
    return exe


@pytest.fixture(scope="session")
def session_sweep(engine_exe) -> Iterator[None]:
    """Nothing this session started outlives it, whatever a test's own cleanup missed."""
    yield
    Engine(engine_exe, "").sweep_session()


@pytest.fixture(scope="session")
def image(engine_exe) -> str:
    """This checkout's image; ODRADEK_TEST_IMAGE names an already built one to test instead."""
    if os.environ.get("ODRADEK_TEST_IMAGE"):
        return os.environ["ODRADEK_TEST_IMAGE"]
    build_image(IMAGE)  # cached layers make a rebuild quick; the base image is made once per machine
    return IMAGE


@pytest.fixture
def engine(engine_exe, image, session_sweep):
    e = Engine(engine_exe, image)
    yield e
    e.cleanup()
