"""Regenerate docs/configuration.md from the field declarations in mvopt/_cfg/*.py.

    python experiments/gen_config_docs.py          # rewrite the file
    python experiments/gen_config_docs.py --check  # exit 1 if it is out of date (used by the tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.config import describe_config  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

HEADER = """# Configuration reference

Every field of an experiment configuration, with its type, unit and default. Generated from the
field declarations in `mvopt/_cfg/*.py` by `python experiments/gen_config_docs.py`; do not edit
by hand. An experiment is a YAML mapping with the sections below (all optional: the embedded
defaults describe a k=4 fat-tree running a 64 MiB ring all-reduce with DCQCN). Unknown keys are
errors; an invalid value is reported with its full path, e.g.
`cluster.k: must be an even integer >= 2, got 5`. Defaults written as a formula are computed
from the port rate `bw` (Gb/s) when the experiment is built (see docs/engine.md).

"""


def render() -> str:
    out = [HEADER]
    section = None
    for row in describe_config():
        top = row["path"].split(".")[0]
        if row["type"] == "section" and "." not in row["path"]:
            out.append(f"\n## `{row['path']}` — {row['doc']}\n\n| field | type | unit | default | meaning |\n|---|---|---|---|---|\n")
            section = top
            continue
        if section is None and "." not in row["path"]:
            out.append("| field | type | unit | default | meaning |\n|---|---|---|---|---|\n")
            section = ""
        if row["type"] == "section":
            out.append(f"| **`{row['path']}`** | section | | | {row['doc']} |\n")
            continue
        doc = row["doc"].replace("|", "\\|")
        typ = row["type"].replace("|", "\\|")
        default = str(row["default"]).replace("|", "\\|")
        out.append(f"| `{row['path']}` | {typ} | {row['unit']} | `{default}` | {doc} |\n")
    return "".join(out)


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        current = OUT.read_text() if OUT.exists() else ""
        sys.exit(0 if current == text else 1)
    OUT.write_text(text)
    print(f"wrote {OUT}")
