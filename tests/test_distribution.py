"""The distribution values and the compute catalogue."""
import pytest

from mlpipe import Compute, Input, Output, PyTorch, TensorFlow, component
from mlpipe.compute import CATALOGUE, define_cluster, vm_size
from mlpipe.distribution import MetricPolicy, Mpi, NotAJobType, as_distribution
from mlpipe.errors import DefinitionError


def test_world_size_is_instances_times_processes_per_node():
    assert PyTorch(processes_per_node=4).world_size(2) == 8
    assert PyTorch().world_size(3) == 3
    assert Mpi(processes_per_node=2).world_size(2) == 4
    assert TensorFlow(workers=3).world_size(1) == 3
    assert TensorFlow().world_size(2) == 2


def test_writers_and_metrics_are_normalised_and_in_the_digest_material():
    d = PyTorch(processes_per_node=2, writers={"model": "rank0", "shards": "sharded"},
                metrics={"loss": "mean", "acc": MetricPolicy("global", "rank0"), "lr": "partial"})
    assert d.writer_policy("model") == "rank0" and d.writer_policy("shards") == "sharded"
    assert d.writer_policy("other") is None
    assert PyTorch(writers=1).writer_policy("anything") == 1
    assert d.metric("loss") == MetricPolicy("global", "mean") and d.metric("lr") == MetricPolicy("partial")
    assert d.to_dict()["metrics"]["acc"] == {"scope": "global", "reduce": "rank0"}
    assert hash(d) == hash(PyTorch(processes_per_node=2, writers={"shards": "sharded",
                                                                  "model": "rank0"},
                                   metrics={"lr": "partial", "loss": "mean",
                                            "acc": MetricPolicy("global", "rank0")}))


@pytest.mark.parametrize("kwargs, match", [
    ({"backend": "ncl"}, "backend 'ncl' is not one of nccl, gloo, mpi"),
    ({"writers": "everyone"}, "writer policy 'everyone' for '\\*' is not 'rank0', 'sharded' or a rank number"),
    ({"writers": {"model": -1}}, "writer policy -1 for 'model'"),
    ({"metrics": {"loss": "median"}}, "metric declaration 'median' is not one of mean"),
    ({"processes_per_node": 0}, "processes_per_node must be >= 1, got 0"),
])
def test_impossible_declarations_raise(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        PyTorch(**kwargs)


def test_azure_dict_and_type_names():
    assert as_distribution({"type": "PyTorch", "process_count_per_instance": 4}) == \
        PyTorch(processes_per_node=4)
    assert as_distribution({"type": "tensorflow", "worker_count": 2,
                            "parameter_server_count": 1}) == TensorFlow(2, 1)
    assert as_distribution("DeepSpeed") == NotAJobType("DeepSpeed")
    with pytest.raises(ValueError, match="distribution type 'ray' is not pytorch, tensorflow or mpi"):
        as_distribution("ray")


def test_component_accepts_the_dict_form_and_rejects_nonsense():
    @component(distribution={"type": "pytorch", "process_count_per_instance": 2})
    def t(data: Input["uri_folder"], model: Output["mlflow_model"]):
        pass

    assert t.spec.distribution == PyTorch(processes_per_node=2)
    with pytest.raises(DefinitionError, match="has distribution 'ray': distribution type 'ray'"):
        @component(distribution="ray")
        def u(data: Input["uri_folder"]):
            pass


def test_catalogue_knows_gpus_and_infiniband():
    rs, s, r = vm_size("Standard_NC24rs_v3"), vm_size("standard_nc24s_v3"), vm_size("Standard_NC24r")
    assert (rs.gpus, rs.gpu_model, rs.infiniband) == (4, "V100", True)
    assert (s.gpus, s.infiniband) == (4, False)
    assert (r.rdma, r.infiniband) == (True, False)
    assert vm_size("Standard_ND96amsr_A100_v4").gpus == 8
    assert not vm_size("Standard_D4s_v3").has_gpu
    assert vm_size("Standard_Nope") is None


def test_user_clusters_resolve_to_their_size():
    define_cluster("td-gpu", size="Standard_ND40rs_v2", nodes=3, node_to_node=False)
    size, cluster, name = CATALOGUE.resolve(Compute("td-gpu"))
    assert (size.gpus, cluster.nodes, cluster.node_to_node, name) == (8, 3, False, "Standard_ND40rs_v2")
    size, _, _ = CATALOGUE.resolve(Compute("td-gpu", sku="Standard_NC6s_v3"))
    assert size.gpus == 1
    with pytest.raises(ValueError, match="cluster 'x' has nodes=0; a node count is an int >= 1"):
        define_cluster("x", size="Standard_D4s_v3", nodes=0)
