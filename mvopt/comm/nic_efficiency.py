"""The fraction of a NIC's line rate that NCCL reaches between servers (``cluster.nic_efficiency``).

Measured with nccl-tests between two servers: a ring all-gather or all-reduce
(``NCCL_ALGO=RING``) crosses the server boundary through every NIC of a server, so its bus
bandwidth is the server's NICs times what one NIC carries; a send/recv between one GPU of each
server uses one NIC, so its bus bandwidth is what that NIC carries. The efficiency is the
per-NIC figure over the line rate (Gb/s / 8 in GB/s), rounded to 4 decimals so that it scales
link rates to whole bits per second.
"""

from __future__ import annotations

from mvopt.errors import ConfigError

__all__ = ["RING_COLLECTIVES", "nic_efficiency", "per_nic_efficiency"]

RING_COLLECTIVES = ("all_gather", "all_reduce", "reduce_scatter")


def per_nic_efficiency(per_nic_GBps: float, nic_gbps: float) -> float:
    """What one NIC carried (GB/s) over its line rate (Gb/s), to 4 decimals, in (0, 1]."""
    eff = round(per_nic_GBps / (nic_gbps / 8.0), 4)
    if not 0 < eff <= 1:
        raise ConfigError("busbw", f"gives {eff:g} of the {nic_gbps:g} Gb/s line rate per NIC: it must be a "
                          "fraction in (0, 1] (check the NIC rate and count, and that the run spans two servers "
                          "with NCCL_ALGO=RING)", per_nic_GBps)
    return eff


def nic_efficiency(collective: str, busbw_GBps: float, nic_gbps: float, nics_per_server: int = 1) -> float:
    """``cluster.nic_efficiency`` from one nccl-tests figure between two servers: ``busbw_GBps``
    of a ring ``collective`` over servers with ``nics_per_server`` NICs of ``nic_gbps``, or of a
    ``send_recv`` between one GPU of each server (one NIC)."""
    if collective == "send_recv":
        return per_nic_efficiency(busbw_GBps, nic_gbps)
    if collective in RING_COLLECTIVES:
        return per_nic_efficiency(busbw_GBps / nics_per_server, nic_gbps)
    raise ConfigError("collective", f"must be send_recv or a ring collective ({', '.join(RING_COLLECTIVES)})",
                      collective)
