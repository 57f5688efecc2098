"""``python -m loopback.azureml``: serve a loopback Azure ML workspace in this process.

Prints one JSON line on stdout (``url``, ``environ``: the variables that point azure-ai-ml at
it, ``workspace``) and serves until stdin closes; then prints the request count and the
seconds spent answering (one JSON line) and exits. The benchmarks run it this way, so that the
service's own work does not count as the client's.
"""
from __future__ import annotations

import json
import sys
import time

from loopback.azureml.service import AzureMLLoopback


def main() -> None:
    service = AzureMLLoopback().start()
    print(json.dumps({"url": service.url, "environ": service.environ(),
                      "workspace": [service.subscription_id, service.resource_group,
                                    service.workspace_name]}), flush=True)
    sys.stdin.read()
    print(json.dumps({"requests": len(service.requests),
                      "answering_s": round(service.answering_s, 3),
                      "by_kind": service.request_kinds()}), flush=True)
    service.stop()
    time.sleep(0)


if __name__ == "__main__":
    main()
