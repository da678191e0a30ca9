"""The one name every source gives a server in the lake's `host` column (and `host=` folder).

The warehouse joins a node's GPU readings, its BMC's and its network ports' by `host`, and the
tools that name a node disagree on the spelling of one machine:
- NVML and IPMI rows: the collector's `--host`, else `socket.gethostname()` (uname's nodename);
- node_exporter's ports: `node_uname_info{nodename}`, the same uname, which is the FQDN where the
  distribution sets the host name so (`hostnamectl set-hostname node-01.cluster.example.com`);
- dcgm-exporter's `Hostname`: its container's host name; under Kubernetes the node's name
  (`NODE_NAME`, as gpu-operator sets it), which the kubelet lowercases and a cloud provider may
  make a DNS name (`ip-10-0-0-5.ec2.internal` where uname says `ip-10-0-0-5`);
- a Prometheus `instance` without a name label: an IP address or a DNS name;
- Slurm's node names: `hostname -s`, the short name.
Taken as they came, one server was `GPU-NODE-01` for its BMC and ports and `gpu-node-01` for its
GPUs, and the joins silently left its BMC energy and its links apart from its GPUs.

The rule: a host is its lowercase short name, the first label of a DNS name
(`NODE-01.cluster.example.com` -> `node-01`); an IP address stays whole. DNS names are
case-insensitive, so lowercasing merges nothing; the short name merges two servers named alike in
two domains (`node-01.site-a` and `node-01.site-b`): name those apart with `--host` (and
dcgm-exporter's `NODE_NAME`); the Prometheus sources warn naming both. A dcgm-exporter without
`NODE_NAME` in Kubernetes names its pod, not the node: no rule can recover that, the deployment
must set it.

Every source here applies it: the node sources to the host they are given, the Prometheus sources
to the labels they read. Whatever else names or looks up a server must apply it too, or it meets
none of these rows where the machine's own name is not already in this form.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def canonical_host(name: str) -> str:
    """`name` as the lake's `host`: lowercase, the first label of a DNS name, an IP address whole."""
    name = name.strip()
    return name if _is_ip_address(name) else name.split(".", 1)[0].lower()


def host_name_regex(host: str) -> str:
    """An RE2 regex (PromQL `=~`, anchored) matching every label value `canonical_host` turns into
    `host`'s name: any case, with or without a domain; an IP address matches itself only."""
    canonical = canonical_host(host)
    if _is_ip_address(canonical):
        return canonical.replace(".", r"\.")
    return f"(?i){canonical}(\\..*)?"  # a short name holds letters, digits, '-' and '_' only


def servers_merged(names: Iterable[str]) -> dict[str, list[str]]:
    """The canonical hosts that `names` (as sources gave them) give to two servers: names in two
    different domains (`node-01.site-a`, `node-01.site-b`). A name without a domain and one with
    (`node-01`, `node-01.site-a`) are one server named by two tools, not a merge."""
    domains: dict[str, dict[str, str]] = {}
    for name in sorted(set(names)):
        short, _, domain = name.strip().partition(".")
        if domain and not _is_ip_address(name.strip()):
            domains.setdefault(short.lower(), {}).setdefault(domain.lower(), name)
    return {host: sorted(by_domain.values()) for host, by_domain in sorted(domains.items()) if len(by_domain) > 1}


def warn_of_merged_servers(names: Iterable[str], source_tag: str) -> None:
    """Log, naming them, the servers of one read that the rule gives one host (servers_merged)."""
    for host, spellings in servers_merged(names).items():
        log.warning("%s: %d servers (%s) get the one host %r, the short name the lake names a server by: "
                    "their rows are mixed under it; name them apart (--host, dcgm-exporter's NODE_NAME)",
                    source_tag, len(spellings), ", ".join(spellings), host)


__all__ = ["canonical_host", "host_name_regex", "servers_merged", "warn_of_merged_servers"]
