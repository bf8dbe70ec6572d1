"""docs/user-guide.md, section 5 ("Many workers through PostgreSQL"), run as written against the
server of ``.ci/services``: its shell block (createdb, optimize, two workers, report), then the
guide's dashboard command and ``optuna.load_study`` with the same plain ``postgresql://`` URL."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import optuna
import pytest
from optuna.trial import TrialState

import postgres_server
from optimize_helpers import REPO

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(postgres_server.skip_reason() is not None, reason=str(postgres_server.skip_reason()))]

GUIDE = REPO / "docs" / "user-guide.md"


def _section_block(heading: str) -> str:
    text = GUIDE.read_text()
    section = text[text.index(heading):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def _guide_url(block: str) -> str:
    return re.search(r"export PG=(\S+)", block).group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def guide_env(tmp_path):
    """The guide's commands run in an empty folder (the repository's search spaces linked in),
    with this interpreter as ``python`` and the checkout importable."""
    if shutil.which("createdb") is None:
        pytest.skip("PostgreSQL's client programs (createdb) are not installed")
    (tmp_path / "search_spaces").symlink_to(REPO / "search_spaces")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def test_the_guides_postgresql_commands_work_as_written(tmp_path, guide_env):
    block = _section_block("## 5. Many workers through PostgreSQL")
    url = _guide_url(block)
    database = url.rsplit("/", 1)[1]
    postgres_server.drop_database(database)         # the block's createdb makes it
    try:
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=guide_env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        assert (tmp_path / "out" / "pg" / "index.html").exists()

        study = optuna.load_study(study_name="quickstart", storage=url)      # the plain URL, as the guide says
        complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
        assert 48 <= len(complete) and not [t for t in study.trials if t.state == TrialState.RUNNING]

        code = ("import optuna; s = optuna.load_study(study_name='quickstart', storage=%r); print(len(s.trials))" % url)
        fresh = subprocess.run([sys.executable, "-c", code], env=guide_env, capture_output=True, text=True, timeout=120)
        assert fresh.returncode == 0 and int(fresh.stdout) == len(study.trials), fresh.stderr[-2000:]

        dashboard = shutil.which("optuna-dashboard", path=guide_env["PATH"])
        if dashboard is None:
            pytest.skip("optuna-dashboard is not installed (extra 'dashboard')")
        port = _free_port()
        proc = subprocess.Popen([dashboard, url, "--port", str(port)], env=guide_env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            studies = _get_json(f"http://127.0.0.1:{port}/api/studies", proc)
            assert [s["study_name"] for s in studies["study_summaries"]] == ["quickstart"], studies
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        postgres_server.drop_database(database)


def _get_json(address: str, proc: subprocess.Popen, timeout_s: float = 60) -> dict:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"optuna-dashboard exited {proc.returncode}: {proc.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(address, timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"optuna-dashboard did not answer {address} within {timeout_s} s")
