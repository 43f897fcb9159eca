"""One simulated two-node Ray cluster per test session (ray.cluster_utils.Cluster), which every
Ray test joins through ``ray_address``; about 15 s and 0.7 GiB to start on the CI machine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """The address of a local cluster of two nodes with 2 logical CPUs each (so 3 workers fit)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'evalflow[ray]'")
    from ray.cluster_utils import Cluster

    args = {"num_cpus": 2, "include_dashboard": False, "object_store_memory": 80 * 2**20}
    cluster = Cluster(initialize_head=True, head_node_args=dict(args))
    node_args = {k: v for k, v in args.items() if k != "include_dashboard"}
    cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="evalflow", include_dashboard=False)
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()
