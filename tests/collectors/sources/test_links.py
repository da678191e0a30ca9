"""The links source's pivot, on hand-written query_range answers: keys, NULLs and what it sets aside."""

from __future__ import annotations

from joulehouse.collectors.sources.links import QUANTITY_LABEL, links_queries, pivot_link_result

DCGM = {"gpu": "0", "UUID": "GPU-a", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-01"}


def test_pivot_keys_links_and_sets_aside_what_it_cannot_read():
    result = [
        {"metric": {"__name__": "DCGM_FI_PROF_NVLINK_TX_BYTES", **DCGM}, "values": [[100, "5e9"], [110, "NaN"]]},
        {"metric": {QUANTITY_LABEL: "tx_bytes_per_s", "device": "mlx5_0", "port": "1", "instance": "node-01:9100"},
         "values": [[100, "1.5e9"], [110, "-3"]]},
        {"metric": {QUANTITY_LABEL: "capacity_bytes_per_s", "device": "mlx5_0", "port": "1", "instance": "node-01:9100"},
         "values": [[100, "25000000000"]]},
        {"metric": {QUANTITY_LABEL: "rx_bytes_per_s", "device": "mlx5_0", "instance": "node-01:9100"}, "values": [[100, "1"]]},
        {"metric": {"__name__": "node_cpu_seconds_total"}, "values": [[100, "1"]]},
    ]
    table, rejected = pivot_link_result(result)
    rows = {(r["link_kind"], r["sampled_at"].timestamp()): r for r in table.to_pylist()}
    assert rows[("nvlink", 100.0)]["tx_bytes_per_s"] == 5e9 and rows[("nvlink", 100.0)]["rx_bytes_per_s"] is None
    assert rows[("nvlink", 110.0)]["tx_bytes_per_s"] is None, "NaN is no reading"
    port = rows[("infiniband", 100.0)]
    assert (port["host"], port["device"], port["tx_bytes_per_s"], port["capacity_bytes_per_s"]) == (
        "node-01", "mlx5_0/1", 1.5e9, 25e9)
    assert len(rejected) == 3
    assert any("negative rate" in r for r in rejected) and any("needs device and port" in r for r in rejected)


def test_the_query_carries_each_selector_to_its_exporter():
    query = links_queries('Hostname="node-01"', 'instance=~"node-01(:[0-9]+)?"', 120)
    assert 'last_over_time(DCGM_FI_PROF_NVLINK_RX_BYTES{Hostname="node-01"}[60s])' in query  # two 30 s steps
    assert 'rate(node_infiniband_port_data_received_bytes_total{instance=~"node-01(:[0-9]+)?"}[120s])' in query


def test_a_link_whose_host_cannot_name_a_folder_is_set_aside_not_written():
    # An IPv6 instance without a Hostname label leaves '[fd00::7]': write_range would raise on it.
    v6 = {"instance": "[fd00::7]:9100"}
    result = [
        {"metric": {"__name__": "DCGM_FI_PROF_NVLINK_TX_BYTES", **DCGM, "Hostname": "", **v6}, "values": [[100, "5e9"]]},
        {"metric": {QUANTITY_LABEL: "tx_bytes_per_s", "device": "mlx5_0", "port": "1", **v6}, "values": [[100, "1e9"]]},
        {"metric": {QUANTITY_LABEL: "tx_bytes_per_s", "device": "mlx5_0", "port": "1", "instance": "node-01:9100"},
         "values": [[100, "2e9"]]},
    ]
    table, rejected = pivot_link_result(result)
    assert table.select(["host", "link_kind", "tx_bytes_per_s"]).to_pylist() == [
        {"host": "node-01", "link_kind": "infiniband", "tx_bytes_per_s": 2e9}]
    assert len(rejected) == 2 and all("cannot name a partition folder" in r for r in rejected)
