import pytest

from mvopt.config import load_config
from mvopt.errors import ConfigError
from mvopt.optimize.cost import PriceTable
from mvopt.optimize.inventory import inventory


def test_fat_tree_counts_match_closed_forms():
    inv = inventory(load_config({"cluster": {"topology": "fat_tree", "k": 8, "gpus_per_server": 8}}))
    assert (inv.hosts, inv.switches, inv.links) == (128, 80, 384)   # k^3/4, 5k^2/4, 3k^3/4
    assert inv.switch_ports == 80 * 8                                  # every switch port used
    assert inv.servers == 128 and inv.gpus == 1024


def test_leaf_spine_oversubscription_sets_spines():
    inv = inventory(load_config({"cluster": {"topology": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8,
                                             "oversubscription": 2.0}}))
    assert inv.switches == 4 + 4 and inv.links == 32 + 4 * 4


def test_invalid_topology_is_a_config_error():
    with pytest.raises(ConfigError, match="oversubscription"):
        inventory(load_config({"cluster": {"topology": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8,
                                           "oversubscription": 3.0}}))


def test_cost_from_price_table():
    inv = inventory(load_config({"cluster": {"topology": "fat_tree", "k": 4, "link_gbps": [100, 400]}}))
    # k=4: 16 host links at 100G, 32 switch-to-switch links at 400G; 20 switches
    table = PriceTable.parse({"switch": 1000, "link": {100: 10, 400: 40}, "switch_port": {100: 1, 400: 4},
                              "nic": {100: 100}}, "prices")
    expected = 20 * 1000 + 16 * 10 + 32 * 40 + 16 * 1 + 64 * 4 + 16 * 100
    assert table.cost(inv) == expected


@pytest.mark.parametrize("prices, fragment", [
    ({"router": 1}, "unknown item"), ({"switch": -1}, "price >= 0"), ([], "mapping"),
    ({"link": {"fast": 1}}, "rates"),
])
def test_bad_price_tables(prices, fragment):
    with pytest.raises(ConfigError, match=fragment):
        PriceTable.parse(prices, "prices")


def test_missing_rate_in_price_table():
    inv = inventory(load_config({"cluster": {"topology": "fat_tree", "k": 4}}))
    with pytest.raises(ConfigError, match="no price for 100 Gb/s"):
        PriceTable.parse({"link": {400: 1}}, "prices").cost(inv)
