"""What runs inside a step: rank/world information, output ownership, sharding, metric logging.

Never imports the DSL, the graph, the checks, a backend or the store; never imports torch at
import time.
"""
from mlpipe.runtime.devices import backend, device
from mlpipe.runtime.distributed import (
                                        all_reduce_metric,
                                        is_writer,
                                        local_rank,
                                        mark_written,
                                        node_rank,
                                        rank,
                                        record_consumed,
                                        shard,
                                        world_size,
)
from mlpipe.runtime.metrics import log_metric

__all__ = ["all_reduce_metric", "backend", "device", "is_writer", "local_rank", "log_metric",
           "mark_written", "node_rank", "rank", "record_consumed", "shard", "world_size"]
