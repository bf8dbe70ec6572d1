"""docs/user-guide.md, sections 2 to 4, run as written in an empty folder: one experiment, the
first search, the report, the dashboard and the Python snippet, then ``simulate best.yaml``
(section 5, PostgreSQL, is run by test_optimize_postgres_guide.py; section 1, the install, by
CI, which installs as the README says)."""

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

import pytest

from optimize_helpers import REPO

pytestmark = pytest.mark.slow

GUIDE = REPO / "docs" / "user-guide.md"


def _blocks(first: str, last: str) -> list[tuple[str, str]]:
    """(language, code) of the fenced blocks between two headings of the guide."""
    text = GUIDE.read_text()
    part = text[text.index(first):text.index(last)]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(bash|python)\n(.*?)```", part, re.S)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dashboard(command: str, cwd, env) -> None:
    """Start the guide's dashboard command (on a free port), read its study list, stop it."""
    port = _free_port()
    proc = subprocess.Popen(["bash", "-c", f"exec {command.split('#')[0].strip()} --port {port}"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"optuna-dashboard exited {proc.returncode}: {proc.stdout.read()[-2000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as r:
                    studies = json.loads(r.read())["study_summaries"]
                break
            except OSError:
                assert time.monotonic() < end, "optuna-dashboard did not answer within 60 s"
                time.sleep(0.3)
        assert [s["study_name"] for s in studies] == ["quickstart"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_guides_first_sections_work_as_written(tmp_path):
    for folder in ("examples", "search_spaces"):
        (tmp_path / folder).symlink_to(REPO / folder)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    blocks = _blocks("## 2. One experiment", "## 5. Many workers")
    assert len(blocks) >= 5
    for lang, code in blocks:
        if code.startswith("optuna-dashboard"):
            if shutil.which("optuna-dashboard", path=env["PATH"]) is None:
                continue    # the dashboard extra is not installed here
            _dashboard(code, tmp_path, env)
            continue
        args = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        res = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"{code}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    assert (tmp_path / "out" / "quickstart" / "index.html").exists() and (tmp_path / "best.yaml").exists()
    again = subprocess.run([sys.executable, "-m", "mvopt", "simulate", "best.yaml"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)          # the guide's next sentence
    assert again.returncode == 0 and "done" in again.stdout, again.stderr[-2000:]
