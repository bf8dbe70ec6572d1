"""``mvopt topo``: build a topology, print its summary, optionally write the compiled arrays.

The options map one-to-one onto ``cluster.*`` fields and go through
:func:`mvopt.config.load_config`, so a bad value gives exactly the error a YAML file would.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from mvopt.config import TOPOLOGIES, load_config

# option -> (cluster field, argparse type, help)
_OPTIONS: list[tuple[str, str, Callable[[str], Any], str]] = []


def _list_of(kind: Callable[[str], Any], sep: str, example: str) -> Callable[[str], list]:
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(sep)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected values separated by {sep!r}, e.g. {example}") from None
    parse.__name__ = f"list ({example})"
    return parse


def _opt(flag: str, key: str, kind: Callable[[str], Any], help_text: str) -> None:
    _OPTIONS.append((flag, key, kind, help_text))


_opt("--k", "k", int, "fat_tree: switch radix (even)")
_opt("--leaves", "leaves", int, "leaf_spine: number of leaves")
_opt("--hosts-per-leaf", "hosts_per_leaf", int, "leaf_spine: hosts (NICs) per leaf")
_opt("--oversubscription", "oversubscription", float, "leaf_spine/rail_optimized: downlink/uplink bandwidth")
_opt("--servers", "servers", int, "rail_optimized: servers")
_opt("--servers-per-group", "servers_per_group", int, "rail_optimized: servers per rail group")
_opt("--tiers", "tiers", int, "rail_optimized: 2 or 3")
_opt("--groups-per-pod", "groups_per_pod", int, "rail_optimized, tiers 3: rail groups per pod")
_opt("--torus-dims", "torus_dims", _list_of(int, "x", "4x4x4"), "torus: dimensions, e.g. 4x4x4")
_opt("--groups", "groups", int, "dragonfly: groups")
_opt("--routers-per-group", "routers_per_group", int, "dragonfly: routers per group")
_opt("--hosts-per-router", "hosts_per_router", int, "dragonfly: hosts (NICs) per router")
_opt("--global-links-per-router", "global_links_per_router", int, "dragonfly: global links per router")
_opt("--gpus-per-server", "gpus_per_server", int, "GPUs per server")
_opt("--nics-per-server", "nics_per_server", int, "NICs per server")
_opt("--link-gbps", "link_gbps", _list_of(float, ",", "100,400"), "link rate per tier, Gb/s (e.g. 100,400)")
_opt("--link-delay-ns", "link_delay_ns", _list_of(float, ",", "1000,500"), "link delay per tier, ns")
_opt("--file", "topology_file", str, "file: an HPCC/ns-3 topology file")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mvopt topo``."""
    parser.add_argument("kind", nargs="?", choices=TOPOLOGIES, metavar="KIND",
                        help=f"topology kind: {', '.join(TOPOLOGIES)} (default: from --config)")
    for flag, key, kind, help_text in _OPTIONS:
        parser.add_argument(flag, dest=f"cluster__{key}", type=kind, default=None, help=help_text)
    parser.add_argument("--config", metavar="YAML", help="experiment file whose cluster section is used "
                        "(options above override its fields)")
    parser.add_argument("--out", metavar="FILE", help="write the compiled topology: HPCC text format "
                        "if FILE ends with .txt, else numpy .npz")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(_topo_parser=parser)


def _cluster_config(args: argparse.Namespace):
    overrides = {k: v for k, v in vars(args).items() if k.startswith("cluster__") and v is not None}
    if args.kind is not None:
        overrides["cluster__topology"] = args.kind
    if args.config is not None:
        return load_config(args.config, **overrides)
    if args.kind is None:
        args._topo_parser.error("give a topology KIND or --config")
    cluster = {k.removeprefix("cluster__"): v for k, v in overrides.items()}
    return load_config({"cluster": cluster})


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def format_summary(s: dict[str, Any]) -> str:
    """The summary as a readable two-column table."""
    common = {"topology", "gpus_per_server", "nics_per_server", "link_gbps", "link_delay_ns",
              "oversubscription", "tiers", "file_node_ids", "node_labels"}
    p = s["parameters"]
    shown = {k: v for k, v in p.items() if k not in common}
    if p.get("topology") in ("leaf_spine", "rail_optimized"):
        shown["oversubscription"] = p.get("oversubscription")
    if p.get("topology") == "rail_optimized":
        shown["tiers"] = p.get("tiers")
    by_tier = lambda d: ", ".join(f"tier {t}: {n}" for t, n in d.items())  # noqa: E731
    bis = "n/a" if s["bisection_gbps"] is None else f"{s['bisection_gbps']:g} Gb/s"
    rows = [
        ("topology", f"{s['kind']}  " + " ".join(f"{k}={v}" for k, v in shown.items())),
        ("hosts (NICs)", f"{s['hosts']}"),
        ("servers", f"{s['servers']}  ({_n(s['nics_per_server'], 'NIC')}, {_n(s['gpus_per_server'], 'GPU')} each)"),
        ("GPUs", f"{s['gpus']}"),
        ("switches", f"{s['switches']}  ({by_tier(s['switches_by_tier'])})"),
        ("links", f"{s['links']}  ({by_tier(s['links_by_tier'])}; tier 0 = host links)"),
        ("switch ports", f"{s['switch_ports']}  (max radix {s['max_switch_radix']})"),
        ("bisection", f"{bis}  [{s['bisection_method']}]"),
        ("diameter", f"{s['diameter_hops']} hops host to host"),
        ("routing", f"{s['routes']} destination ranges, {s['nhsets']} next-hop sets"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    """Build the topology, print its summary, write ``--out``."""
    from mvopt.cluster import build_topology, write_hpcc_topology

    cfg = _cluster_config(args)
    topo = build_topology(cfg.cluster, base_dir=cfg.base_dir)
    summary = topo.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))
    if args.out:
        if args.out.endswith(".txt"):
            write_hpcc_topology(topo, args.out)
        else:
            topo.save(args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
