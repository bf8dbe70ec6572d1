"""Directed ports from an undirected link list, in CSR order of the owning (sending) node."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PortTable", "make_ports"]


@dataclass(frozen=True)
class PortTable:
    """Ports of a network: ``node_port_offset`` is CSR over owners; per-port columns."""

    node_port_offset: np.ndarray  # int64[n_node+1]
    port_node: np.ndarray         # int32: owner (sender)
    port_peer_node: np.ndarray    # int32: receiver
    port_peer_port: np.ndarray    # int32: the receiver's port on the same link (sends back)
    port_rate_bps: np.ndarray     # int64
    port_delay_ps: np.ndarray     # int64
    port_tier: np.ndarray         # int8
    port_link: np.ndarray         # int64: index of the link in the input list


def make_ports(n_node: int, a: np.ndarray, b: np.ndarray, rate_bps: np.ndarray, delay_ps: np.ndarray,
               tier: np.ndarray) -> PortTable:
    """Two ports per link (a→b owned by a, b→a owned by b), sorted by owner, then peer node,
    then link index (parallel links).

    The numbering is thus canonical: it does not depend on the order in which links are listed,
    so a topology written to a file or a networkx graph and read back has identical port ids
    (and identical ECMP choices). A host's single port is ``node_port_offset[h]``.
    """
    n_link = a.size
    owner = np.concatenate([a, b]).astype(np.int64)
    peer = np.concatenate([b, a]).astype(np.int64)
    link = np.concatenate([np.arange(n_link), np.arange(n_link)])
    order = np.lexsort((link, peer, owner))
    pos = np.empty(2 * n_link, np.int64)
    pos[order] = np.arange(2 * n_link)
    reverse = (order + n_link) % (2 * n_link)  # the other direction of the same link
    offset = np.zeros(n_node + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n_node), out=offset[1:])
    link_sorted = link[order]
    return PortTable(
        node_port_offset=offset,
        port_node=owner[order].astype(np.int32),
        port_peer_node=peer[order].astype(np.int32),
        port_peer_port=pos[reverse].astype(np.int32),
        port_rate_bps=np.asarray(rate_bps, np.int64)[link_sorted],
        port_delay_ps=np.asarray(delay_ps, np.int64)[link_sorted],
        port_tier=np.asarray(tier, np.int8)[link_sorted],
        port_link=link_sorted,
    )
