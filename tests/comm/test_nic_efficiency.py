"""cluster.nic_efficiency from nccl-tests figures between two servers: closed forms and the CLI."""

import re

import pytest

from mvopt.comm.nic_efficiency import nic_efficiency, per_nic_efficiency
from mvopt.errors import ConfigError

from nccl_logs import NEW_FORMAT


def test_ring_collectives_divide_by_the_nics_and_send_recv_does_not():
    # mscclpp's NDmv4 all-gather, 1 GiB: 2 x 1 GPU (one 200 Gb/s NIC each) and 2 x 8 (eight each)
    assert nic_efficiency("all_gather", 15.84, 200) == 0.6336            # 15.84 / 25
    assert nic_efficiency("all_gather", 177.05, 200, nics_per_server=8) == 0.8853   # 177.05 / 8 / 25
    assert nic_efficiency("send_recv", 13.96, 400) == 0.2792             # 13.96 / 50
    assert per_nic_efficiency(47.0, 400) == 0.94


@pytest.mark.parametrize("args, words", [
    (("all_gather", 60.0, 400), "fraction in (0, 1]"),                # more than 50 GB/s on one NIC
    (("all_to_all", 20.0, 400), "send_recv or a ring collective"),
])
def test_bad_figures_are_refused(args, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        nic_efficiency(*args)


def test_calibrate_prints_the_efficiency_of_a_two_server_log(tmp_path, capsys):
    from mvopt.__main__ import main
    log = tmp_path / "ar.log"
    log.write_text(NEW_FORMAT)
    assert main(["calibrate", str(log), "--nic-gbps", "400", "--nics-per-server", "8"]) == 0
    out = capsys.readouterr().out
    # the log's largest size: in-place busbw 201.38 GB/s over 8 NICs of 50 GB/s
    assert f"at the largest size: {201.38 / 8 / 50:.4f}" in out
    assert main(["calibrate", str(log), "--nic-gbps", "400", "--out", str(tmp_path / "x.yaml")]) == 1
