"""The compute catalogue: what common Azure ML VM sizes have (GPUs, InfiniBand), and the user's
own cluster definitions. Facts only; the distribution checks judge a design against them.

Nothing here talks to Azure: a cluster defined here is what the user says their cluster is.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlpipe.spec import Compute


@dataclass(frozen=True, slots=True)
class VmSize:
    """One Azure VM size.

    Args:
        name: the size (``Standard_NC24rs_v3``).
        vcpus: virtual CPUs.
        memory_gib: RAM.
        gpus: GPUs per node (0 for a CPU size).
        gpu_model: ``V100``, ``A100``…; None for a CPU size.
        gpu_memory_gib: memory of one GPU.
        infiniband: SR-IOV InfiniBand that NCCL and MPI can use across nodes (the ``r`` sizes
            of current generations).
        rdma: any RDMA network, including the older non-SR-IOV one of ``Standard_NC24r``.

    Example:
        >>> vm_size("standard_nc24rs_v3").gpus
        4
    """

    name: str
    vcpus: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None
    gpu_memory_gib: float | None = None
    infiniband: bool = False
    rdma: bool = False

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    def describe(self) -> str:
        """``Standard_NC24s_v3 (4 x V100 16 GiB, no InfiniBand)`` and the like."""
        if not self.has_gpu:
            what = f"{self.vcpus} vCPUs, no GPU"
        else:
            what = f"{self.gpus} x {self.gpu_model} {self.gpu_memory_gib:g} GiB"
        return f"{self.name} ({what}, {'InfiniBand' if self.infiniband else 'no InfiniBand'})"


@dataclass(frozen=True, slots=True)
class Cluster:
    """A compute cluster as the user declares it.

    Args:
        name: the Azure ML compute name (``gpu-cluster``).
        size: its VM size.
        nodes: the most nodes it scales to.
        node_to_node: False for a cluster whose network blocks traffic between nodes (an
            isolated or locked-down no-public-IP design without node-to-node rules).
    """

    name: str
    size: str
    nodes: int = 1
    node_to_node: bool = True


def _gpu(name: str, vcpus: int, mem: float, gpus: int, model: str, gpu_mem: float,
         ib: bool = False, rdma: bool | None = None) -> VmSize:
    return VmSize(name, vcpus, mem, gpus, model, gpu_mem, ib, ib if rdma is None else rdma)


# Sizes from the Azure VM size pages (GPU-accelerated compute, general purpose, memory
# optimised, HPC). Extend with define_vm_size for others.
_SIZES = [
    _gpu("Standard_NC6", 6, 56, 1, "K80", 12), _gpu("Standard_NC12", 12, 112, 2, "K80", 12),
    _gpu("Standard_NC24", 24, 224, 4, "K80", 12),
    # The older RDMA size: RDMA, but not the SR-IOV InfiniBand NCCL uses today.
    _gpu("Standard_NC24r", 24, 224, 4, "K80", 12, ib=False, rdma=True),
    _gpu("Standard_NC6s_v3", 6, 112, 1, "V100", 16),
    _gpu("Standard_NC12s_v3", 12, 224, 2, "V100", 16),
    _gpu("Standard_NC24s_v3", 24, 448, 4, "V100", 16),
    _gpu("Standard_NC24rs_v3", 24, 448, 4, "V100", 16, ib=True),
    _gpu("Standard_NC4as_T4_v3", 4, 28, 1, "T4", 16),
    _gpu("Standard_NC8as_T4_v3", 8, 56, 1, "T4", 16),
    _gpu("Standard_NC16as_T4_v3", 16, 110, 1, "T4", 16),
    _gpu("Standard_NC64as_T4_v3", 64, 440, 4, "T4", 16),
    _gpu("Standard_NC24ads_A100_v4", 24, 220, 1, "A100", 80),
    _gpu("Standard_NC48ads_A100_v4", 48, 440, 2, "A100", 80),
    _gpu("Standard_NC96ads_A100_v4", 96, 880, 4, "A100", 80),
    _gpu("Standard_NC40ads_H100_v5", 40, 320, 1, "H100 NVL", 94),
    _gpu("Standard_NC80adis_H100_v5", 80, 640, 2, "H100 NVL", 94),
    _gpu("Standard_ND40rs_v2", 40, 672, 8, "V100", 32, ib=True),
    _gpu("Standard_ND96asr_v4", 96, 900, 8, "A100", 40, ib=True),
    _gpu("Standard_ND96amsr_A100_v4", 96, 1900, 8, "A100", 80, ib=True),
    _gpu("Standard_ND96isr_H100_v5", 96, 1900, 8, "H100", 80, ib=True),
    _gpu("Standard_ND96isr_H200_v5", 96, 1850, 8, "H200", 141, ib=True),
    _gpu("Standard_NV6", 6, 56, 1, "M60", 8), _gpu("Standard_NV12s_v3", 12, 112, 1, "M60", 8),
    VmSize("Standard_D2_v2", 2, 7), VmSize("Standard_D3_v2", 4, 14),
    VmSize("Standard_D4_v2", 8, 28),
    VmSize("Standard_D11_v2", 2, 14), VmSize("Standard_D12_v2", 4, 28),
    VmSize("Standard_DS3_v2", 4, 14), VmSize("Standard_DS11_v2", 2, 14),
    VmSize("Standard_DS12_v2", 4, 28),
    VmSize("Standard_D2s_v3", 2, 8), VmSize("Standard_D4s_v3", 4, 16),
    VmSize("Standard_D8s_v3", 8, 32), VmSize("Standard_D16s_v3", 16, 64),
    VmSize("Standard_D4ds_v5", 4, 16), VmSize("Standard_D8ds_v5", 8, 32),
    VmSize("Standard_E4s_v3", 4, 32), VmSize("Standard_E8s_v3", 8, 64),
    VmSize("Standard_F4s_v2", 4, 8), VmSize("Standard_F8s_v2", 8, 16),
    VmSize("Standard_HB120rs_v3", 120, 448, infiniband=True, rdma=True),
    VmSize("Standard_HC44rs", 44, 352, infiniband=True, rdma=True),
]


class Catalogue:
    """VM sizes by name (case-insensitive) and clusters by name.

    ``CATALOGUE`` is the one the checks read; ``define_cluster``/``define_vm_size`` add to it.
    """

    def __init__(self, sizes: list[VmSize] | None = None) -> None:
        self.sizes: dict[str, VmSize] = {s.name.lower(): s for s in (sizes or [])}
        self.clusters: dict[str, Cluster] = {}

    def vm_size(self, name: str | None) -> VmSize | None:
        return None if name is None else self.sizes.get(name.lower())

    def cluster(self, name: str | None) -> Cluster | None:
        return None if name is None else self.clusters.get(name)

    def resolve(self, compute: Compute | None) -> tuple[VmSize | None, Cluster | None, str | None]:
        """The size, the cluster and the size name a step's compute points at.

        ``Compute.sku`` wins over the cluster's size; either may be unknown (None).
        """
        if compute is None:
            return None, None, None
        cluster = self.cluster(compute.name)
        name = compute.sku or (cluster.size if cluster else None)
        return self.vm_size(name), cluster, name


CATALOGUE = Catalogue(_SIZES)


def vm_size(name: str) -> VmSize | None:
    """The catalogue entry for a VM size name (any case), or None.

    Example:
        >>> vm_size("Standard_NC24s_v3").infiniband
        False
    """
    return CATALOGUE.vm_size(name)


def define_vm_size(size: VmSize) -> VmSize:
    """Add (or replace) a VM size the catalogue does not know."""
    CATALOGUE.sizes[size.name.lower()] = size
    return size


def define_cluster(name: str, *, size: str, nodes: int = 1, node_to_node: bool = True) -> Cluster:
    """Declare one of your Azure ML clusters, so the checks know its size and network.

    Args:
        name: the compute name steps use (``Compute("gpu-cluster")``).
        size: its VM size.
        nodes: the most nodes it scales to; a step asking for more instances is reported.
        node_to_node: False when its network blocks node-to-node traffic (MPI and multi-node
            collectives then fail).

    Returns:
        The cluster.

    Example:
        >>> define_cluster("gpu-cluster", size="Standard_NC24rs_v3", nodes=4)
        Cluster(name='gpu-cluster', size='Standard_NC24rs_v3', nodes=4, node_to_node=True)
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"cluster {name!r} has nodes={nodes!r}; a node count is an int >= 1")
    cluster = Cluster(name, size, nodes, node_to_node)
    CATALOGUE.clusters[name] = cluster
    return cluster
