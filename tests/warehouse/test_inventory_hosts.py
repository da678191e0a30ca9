"""The inventory's hosts are read as the lake names a server (collectors/sources/host_names.py),
whatever spelling the operator wrote: dim_gpu's host is what the accounts join a GPU's unread hours
to its server's BMC energy by."""

from __future__ import annotations

import logging

from warehouse_lakes import at, gpu_rows, write

from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.settings import WarehouseSettings

HEADER = ("gpu_uuid,host,gpu_index,gpu_model,rack,site,region,purchased_on,purchase_price_usd,embodied_kgco2e,"
          "lifetime_years\n")


def _inventory(path, hosts_by_uuid: dict[str, str]):
    path.write_text(HEADER + "".join(f"{uuid},{host},0,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-01-01,30000,150,5\n"
                                     for uuid, host in hosts_by_uuid.items()))
    return WarehouseSettings(inventory_path=str(path))


def test_a_server_the_inventory_writes_as_an_fqdn_in_capitals_is_the_server_its_readings_and_bmc_name(
        lake, tmp_path, warehouse):
    """A hand-written inventory said `NODE-01.cluster.example.com` for the server every source
    names `node-01`. dim_gpu took that spelling, so the GPU that sent nothing after noon had its
    unread hours on no server: the accounts charged the whole 1 kW BMC to the GPU that was read
    (24.0 kWh for the day instead of 15.6)."""
    write(lake, gpu_rows(range(0, 3600, 10), 300.0, uuid="GPU-read", host="node-01")
          + gpu_rows(range(0, 3600, 10), 300.0, uuid="GPU-ip", host="10.0.0.7"))
    write(lake, [dict(sampled_at=at(t), host="node-01", power_w=1000.0, source="ipmi") for t in range(0, 3601, 30)],
          "node_samples")
    con = warehouse(settings=_inventory(tmp_path / "inventory.csv", {
        "GPU-read": "NODE-01.cluster.example.com", "GPU-silent": "Node-01", "GPU-ip": "10.0.0.7"}))
    assert dict(con.execute("SELECT gpu_uuid, host FROM dim_gpu").fetchall()) == {
        "GPU-read": "node-01", "GPU-silent": "node-01", "GPU-ip": "10.0.0.7"}
    with_bmc = con.execute("SELECT list(DISTINCT gpu_uuid ORDER BY gpu_uuid) FROM dim_gpu "
                           "JOIN fct_node_energy_hourly USING (host)").fetchone()[0]
    assert with_bmc == ["GPU-read", "GPU-silent"]


# Spellings an operator writes: case, domains (and a root's trailing dot), whitespace, '_' and
# digits, IPv4 and IPv6 addresses (kept whole, as canonical_host keeps them).
SPELLINGS = ["node-01", "NODE-02", "Node-03.Cluster.Example.COM", "  node-04  ", "node-05.", "gpu_node_06",
             "GPU_NODE_07.dc1.example.org", "a100x8-08.rack3", "h200n09", "10.0.0.10", " 192.168.1.11 ",
             "fd00::12", "2001:DB8::13", "::1", "ip-10-0-0-14.ec2.internal", "NODE-15.site-a", "0node16"]


def test_every_inventory_host_is_the_name_canonical_host_gives_it(lake, tmp_path, warehouse):
    write(lake, gpu_rows(range(0, 60, 10), 300.0, uuid="GPU-lake"))
    hosts = {f"GPU-{i}": name for i, name in enumerate(SPELLINGS)}
    con = warehouse(settings=_inventory(tmp_path / "inventory.csv", hosts))
    got = dict(con.execute("SELECT gpu_uuid, host FROM dim_gpu WHERE in_inventory").fetchall())
    assert got == {uuid: canonical_host(name) for uuid, name in hosts.items()}


def test_two_servers_the_inventory_names_in_two_domains_are_warned_of(lake, tmp_path, warehouse, caplog):
    """The short name is the lake's name: two servers the inventory tells apart only by their
    domain get one host, and the build says which."""
    write(lake, gpu_rows(range(0, 60, 10), 300.0))
    with caplog.at_level(logging.WARNING):
        warehouse(settings=_inventory(tmp_path / "inventory.csv", {
            "GPU-a": "node-01.site-a.example.com", "GPU-b": "node-01.site-b.example.com", "GPU-c": "NODE-01"}))
    merged = [r.getMessage() for r in caplog.records if "node-01.site-a.example.com" in r.getMessage()]
    assert len(merged) == 1 and "node-01.site-b.example.com" in merged[0] and "'node-01'" in merged[0]
