"""Cluster cost from a price table: the optional second objective of a search space.

A price table gives a price per switch, per switch port, per link (cable) and per NIC. Each price
is a number, or a mapping from link rate in Gb/s to price (``{100: 300, 400: 900}``) for items
that depend on the rate (ports, links, NICs); a rate missing from such a mapping is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mvopt.errors import ConfigError
from mvopt.optimize.inventory import Inventory

__all__ = ["PriceTable", "ITEMS"]

ITEMS = ("switch", "switch_port", "link", "nic", "gpu", "server")


@dataclass(frozen=True)
class PriceTable:
    """Prices of the items of :data:`ITEMS` (missing items cost nothing)."""

    prices: Mapping[str, float | Mapping[float, float]]

    @classmethod
    def parse(cls, data: Any, path: str) -> "PriceTable":
        """Validate a ``prices:`` mapping from a search space (``path`` names it in errors)."""
        if not isinstance(data, Mapping) or not data:
            raise ConfigError(path, f"must be a mapping of item -> price (items: {', '.join(ITEMS)})", data)
        out: dict[str, Any] = {}
        for item, price in data.items():
            if item not in ITEMS:
                raise ConfigError(f"{path}.{item}", f"unknown item (known: {', '.join(ITEMS)})", show_value=False)
            if isinstance(price, Mapping):
                table = {}
                for rate, p in price.items():
                    if not _number(rate) or not _number(p) or p < 0:
                        raise ConfigError(f"{path}.{item}", "must map link rates (Gb/s) to prices >= 0", dict(price))
                    table[float(rate)] = float(p)
                out[item] = table
            elif _number(price) and price >= 0:
                out[item] = float(price)
            else:
                raise ConfigError(f"{path}.{item}", "must be a price >= 0 or a mapping rate -> price", price)
        return cls(out)

    def _price(self, item: str, gbps: float | None = None) -> float:
        p = self.prices.get(item, 0.0)
        if isinstance(p, Mapping):
            if gbps not in p:
                raise ConfigError(f"prices.{item}", f"has no price for {gbps:g} Gb/s (rates priced: "
                                  f"{', '.join(f'{r:g}' for r in sorted(p))})", show_value=False)
            return p[gbps]
        return float(p)

    def cost(self, inv: Inventory) -> float:
        """Total price of the hardware in ``inv``."""
        total = self._price("switch") * inv.switches
        total += sum(self._price("switch_port", r) * n for r, n in inv.ports_by_gbps.items())
        total += sum(self._price("link", r) * n for r, n in inv.links_by_gbps.items())
        total += self._price("nic", inv.nic_gbps) * inv.hosts
        total += self._price("gpu") * inv.gpus + self._price("server") * inv.servers
        return total


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
