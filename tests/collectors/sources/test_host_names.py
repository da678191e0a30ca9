"""One server, one `host`, whichever tool names it. The warehouse joins a node's GPUs, its BMC and
its InfiniBand ports by `host`; each deployment below is how the real tools name one machine
(collectors/sources/host_names.py), written by hand as Prometheus, ipmitool and NVML answer."""

from __future__ import annotations

import logging

import pytest

from joulehouse.collectors.sources.dcgm_series import pivot_range_result
from joulehouse.collectors.sources.gpu_processes import GpuProcessSource
from joulehouse.collectors.sources.ipmi import CommandResult, IpmiSource
from joulehouse.collectors.sources.links import QUANTITY_LABEL, pivot_link_result
from joulehouse.collectors.sources.nvml import NvmlSource
from joulehouse.collectors.sources.nvml_links import NvmlLinkSource
from joulehouse.collectors.sources.sim import SimSource
from nvml_stub.fixture import GpuState

INSTANTS_S = [1_767_225_600 + 30 * i for i in range(120)]  # an hour at 30 s
DCMI_1150_W = "    Instantaneous power reading:                  1150 Watts\n"

# (dcgm-exporter's Hostname, node_exporter's nodename, the collector's host: --host or gethostname(),
#  the one host of the server in the lake)
DEPLOYMENTS = {
    # gpu-operator sets NODE_NAME, the Kubernetes node name, which the kubelet lowercases
    "uppercase uname, kubelet lowercases": ("gpu-node-01", "GPU-NODE-01", "GPU-NODE-01", "gpu-node-01"),
    # EKS: the node is named by its private DNS name, uname (Ubuntu AMI) by the short one
    "eks private dns name": ("ip-10-0-0-5.ec2.internal", "ip-10-0-0-5", "ip-10-0-0-5", "ip-10-0-0-5"),
    # README's advice for an exporter naming the FQDN, with the collector run as --host node-01
    "dcgm_selector on the fqdn": ("node-01.example.org", "node-01", "node-01", "node-01"),
    # a RHEL node whose hostname is its FQDN, the collector given the short name
    "fqdn uname, --host short": ("node-01.cluster.example.com", "node-01.cluster.example.com", "node-01", "node-01"),
}


def dcgm_answer(hostname: str) -> list[dict]:
    return [{"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": str(g), "UUID": f"GPU-{g}",
                        "modelName": "NVIDIA H100 80GB HBM3", "Hostname": hostname, "instance": "10.0.0.5:9400"},
             "values": [[t, "300"] for t in INSTANTS_S]} for g in range(8)]


def links_answer(hostname: str, nodename: str) -> list[dict]:
    nvlink = [{"metric": {"__name__": "DCGM_FI_PROF_NVLINK_TX_BYTES", "gpu": str(g), "UUID": f"GPU-{g}",
                          "Hostname": hostname}, "values": [[t, "1e9"] for t in INSTANTS_S]} for g in range(8)]
    ports = [{"metric": {QUANTITY_LABEL: quantity, "device": f"mlx5_{p}", "port": "1", "instance": "10.0.0.5:9100",
                         "nodename": nodename}, "values": [[t, "3e9"] for t in INSTANTS_S]}
             for p in range(4) for quantity in ("tx_bytes_per_s", "rx_bytes_per_s")]
    return nvlink + ports


def bmc_rows(host: str) -> list[dict]:
    source = IpmiSource(host, runner=lambda argv, timeout_s, env: CommandResult(0, DCMI_1150_W, ""))
    return source.read().to_pylist()


@pytest.mark.parametrize("hostname, nodename, collector_host, lake_host", DEPLOYMENTS.values(), ids=DEPLOYMENTS)
def test_a_servers_bmc_and_ports_meet_its_gpus(hostname, nodename, collector_host, lake_host, nvml_stub):
    gpu_table, _ = pivot_range_result(dcgm_answer(hostname))
    link_table, _ = pivot_link_result(links_answer(hostname, nodename))
    nvml = NvmlSource(collector_host)
    try:
        nvml_rows = nvml.read().to_pylist()
    finally:
        nvml.close()
    gpu_hosts = set(gpu_table.column("host").to_pylist())
    ports = [r for r in link_table.to_pylist() if r["link_kind"] == "infiniband"]
    bmc = bmc_rows(collector_host)
    # before: e.g. 480 of 480 port rows under GPU-NODE-01 beside GPUs under gpu-node-01, no BMC row met them
    assert len(ports) == 480 and [r for r in ports if r["host"] not in gpu_hosts] == []
    assert len(bmc) == 1 and bmc[0]["host"] in gpu_hosts
    hosts = {r["host"] for r in [*gpu_table.to_pylist(), *link_table.to_pylist(), *bmc, *nvml_rows]}
    assert hosts == {lake_host}, f"one server under {sorted(hosts)}"


def test_an_address_stays_whole_and_a_dns_name_becomes_its_node():
    # node_exporter without its uname series: the instance names the host, an IP or a DNS name
    result = [{"metric": {QUANTITY_LABEL: "tx_bytes_per_s", "device": "mlx5_0", "port": "1", "instance": instance},
               "values": [[INSTANTS_S[0], "1e9"]]} for instance in ("10.0.0.7:9100", "Node-02.example.org:9100")]
    table, _ = pivot_link_result(result)
    assert sorted(table.column("host").to_pylist()) == ["10.0.0.7", "node-02"]


def test_two_servers_named_alike_in_two_domains_are_named_in_a_warning(caplog):
    answer = dcgm_answer("node-01.site-a.example.org")
    answer[1]["metric"] = {**answer[1]["metric"], "Hostname": "node-01.site-b.example.org", "UUID": "GPU-b"}
    answer.append({**answer[0], "metric": {**answer[0]["metric"], "Hostname": "node-01", "UUID": "GPU-c"}})
    with caplog.at_level(logging.WARNING, logger="joulehouse.collectors.sources.host_names"):
        table, _ = pivot_range_result(answer)
    assert set(table.column("host").to_pylist()) == {"node-01"}
    [warning] = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert "node-01.site-a.example.org" in warning and "node-01.site-b.example.org" in warning
    assert "2 servers" in warning, "the short name beside one FQDN is one server named by two tools"


def test_every_node_source_names_the_collectors_host_alike(nvml_stub, tmp_path):
    # gethostname() where the hostname is set as an FQDN in capitals: the GPUs, their NVLink counters
    # and processes (and the simulator standing in for NVML) under node-01, as the BMC's and ports' rows
    host = "NODE-01.Cluster.Example.com"
    nvml_stub.write([GpuState.a100(0, processes={4242: 512}, nvlink_link_count=12, nvlink_speed_mbps=25_000,
                                   nvlink_tx_kib_total=1, nvlink_rx_kib_total=1)])
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_81235/step_0\n")
    nvml, links = NvmlSource(host), NvmlLinkSource(host)
    try:
        rows = {"nvml": nvml.read().to_pylist(), "processes": GpuProcessSource(host, nvml, proc_root=tmp_path).read()
                .to_pylist(), "nvlink": links.read().to_pylist(), "sim": SimSource(host, gpus=2).read().to_pylist()}
    finally:
        nvml.close()
        links.close()
    assert all(rows.values()), {name: len(r) for name, r in rows.items()}
    hosts = {name: {row["host"] for row in table} for name, table in rows.items()}
    assert hosts == {name: {"node-01"} for name in rows}
