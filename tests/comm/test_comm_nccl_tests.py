"""nccl-tests parser: current and old layouts, MPI prefixes, foreign and corrupt input."""

import math

import pytest

from mvopt.comm import parse_nccl_tests, read_nccl_tests
from mvopt.errors import InputFileError

from nccl_logs import NEW_FORMAT, OLD_FORMAT


def test_current_layout_with_mpi_prefixes_and_nccl_info_lines():
    [sw] = parse_nccl_tests(NEW_FORMAT, "ar.log")
    assert (sw.collective, sw.nranks, sw.gpu_name, sw.dtype, sw.redop) == \
        ("all_reduce", 8, "NVIDIA A100-SXM4-80GB", "float", "sum")
    assert len(sw.points) == 11
    p = sw.points[0]
    assert (p.size_bytes, p.count, p.time_out_us, p.busbw_out_GBps, p.time_in_us, p.busbw_in_GBps) == \
        (1048576, 262144, 39.18, 46.84, 38.78, 47.31)
    assert p.time_us() == 38.78 and p.time_us("out-of-place") == 39.18


def test_old_layout_and_not_available_in_place():
    [sw] = parse_nccl_tests(OLD_FORMAT, "ag.log")
    assert sw.collective is None and sw.nranks == 4 and sw.gpu_name == "NVIDIA H100 80GB HBM3"
    assert [p.size_bytes for p in sw.points] == [2**20, 2**21, 2**22, 2**23]
    assert math.isnan(sw.points[2].time_in_us) and sw.points[2].time_us() == 50.40


def test_two_tables_in_one_file(tmp_path):
    f = tmp_path / "both.log"
    f.write_text(NEW_FORMAT + OLD_FORMAT.replace("# nThread", "# Collective test starting: all_gather_perf\n# nThread"))
    a, b = read_nccl_tests(f)
    assert (a.collective, b.collective) == ("all_reduce", "all_gather")
    assert (a.nranks, b.nranks) == (8, 4)


@pytest.mark.parametrize("text", [
    "version: 1\ncurves: []\n",
    "size,time\n1024,3.0\n",
    "",
    "# just a comment\n     1048576  262144  float  sum  -1  39.18  26.77  46.84  0\n",
])
def test_foreign_files_are_rejected(text):
    with pytest.raises(InputFileError, match="not an nccl-tests log"):
        parse_nccl_tests(text, "foreign.txt")


def test_bad_rows_name_the_line():
    broken = NEW_FORMAT.replace("  66.70   62.88  110.05", "  66.70   62.88")
    with pytest.raises(InputFileError) as e:
        parse_nccl_tests(broken, "x.log")
    assert e.value.line == 22 and "fields" in str(e.value)
    corrupt = NEW_FORMAT.replace("103.40   81.13  141.97      0", "103.40   81.13  141.97      3")
    with pytest.raises(InputFileError, match="wrong results"):
        parse_nccl_tests(corrupt, "x.log")
    garbage = NEW_FORMAT.replace("48.35", "fast")
    with pytest.raises(InputFileError, match="expected a number"):
        parse_nccl_tests(garbage, "x.log")


def test_missing_file():
    with pytest.raises(InputFileError, match="cannot be read"):
        read_nccl_tests("/nonexistent/all_reduce.log")


def _bare(text: str) -> str:
    """The log without its 'Collective test starting' and Rank lines (what some launchers keep)."""
    return "\n".join(line for line in text.splitlines() if "Collective test starting" not in line and "Rank " not in line)


def test_the_gpu_count_comes_from_the_nGpus_header_without_rank_lines():
    [sw] = parse_nccl_tests(_bare(NEW_FORMAT), "x.log")
    assert sw.nranks == 1 and sw.gpu_name is None           # nThread 1 nGpus 1
    eight = _bare(NEW_FORMAT).replace("nThread 1 nGpus 1", "nThread 1 nGpus 8")
    assert parse_nccl_tests(eight, "x.log")[0].nranks == 8


def test_the_collective_comes_from_the_binary_named_in_the_log_or_the_file_name():
    bare = _bare(NEW_FORMAT)
    assert parse_nccl_tests(bare, "run1.log")[0].collective is None
    assert parse_nccl_tests("$ ./build/all_gather_perf -b 1M -e 1G -f 2 -g 8\n" + bare, "run1.log")[0].collective == "all_gather"
    assert parse_nccl_tests(bare, "logs/reduce_scatter_perf.txt")[0].collective == "reduce_scatter"


def test_rank_lines_without_group_are_read():
    old = NEW_FORMAT.replace(" Group  0 Pid", " Pid")
    [sw] = parse_nccl_tests(old, "x.log")
    assert sw.nranks == 8 and sw.gpu_name == "NVIDIA A100-SXM4-80GB"


def test_calibrate_names_everything_missing_in_one_message(tmp_path, capsys):
    from mvopt.__main__ import main
    log = tmp_path / "run1.log"
    log.write_text("\n".join(line for line in _bare(NEW_FORMAT).splitlines() if "nGpus" not in line))
    assert main(["calibrate", str(log)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--collective NAME" in err and "--gpus N" in err and "--gpu TYPE" in err and "run1.log:" in err
    # what the log says is read: with nGpus and the binary in its name, only the GPU type is asked for
    named = tmp_path / "all_reduce_perf.log"
    named.write_text(_bare(NEW_FORMAT).replace("nGpus 1", "nGpus 8"))
    assert main(["calibrate", str(named)]) == 1
    err = capsys.readouterr().err
    assert "--gpu TYPE" in err and "--collective" not in err and "--gpus" not in err
    assert main(["calibrate", str(named), "--gpu", "A100"]) == 0
    assert "A100" in capsys.readouterr().out
