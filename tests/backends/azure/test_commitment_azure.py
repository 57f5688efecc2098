"""``submit --target azure --policy FILE``: the Azure run commits to its qualification policy
before the job is sent, as a local run does (tests/evidence/test_commitment.py): recorded with
the run in the store. The real MLClient against the loopback Azure ML service."""
from __future__ import annotations

import re

from backends.azure.azure_helpers import ROOT, WS
from bundle_project import PROMOTION_POLICY
from mlpipe.digests import digest_bytes

PF = ROOT / "tests" / "fixtures" / "azure" / "preflight"
GOOD = ("dependencies:\n- python=3.11\n- pip:\n  - mlpipe-aml==0.1.0\n  - mlflow-skinny==2.18.0\n"
        "  - azureml-mlflow==1.57.0\n")


def test_an_azure_run_records_the_policy_it_committed_to(azureml, monkeypatch, tmp_path):
    from click.testing import CliRunner

    from mlpipe.cli import azure as cli_azure
    from mlpipe.cli import main
    from mlpipe.evidence import open_store
    from mlpipe.evidence.storage import models as m

    azureml.add_environment("good-env", "1", conda_file=GOOD)
    azureml.add_environment("defect-cpu", "5", conda_file=GOOD)
    monkeypatch.setattr(cli_azure, "_credential", lambda: azureml.credential())
    monkeypatch.setenv("MLPIPE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yml").write_text(PROMOTION_POLICY)
    flags = ["--workspace", WS.workspace_name, "--resource-group", WS.resource_group,
             "--subscription", WS.subscription_id]
    target = f"{PF / 'pf.py'}:resolving"
    bad = CliRunner().invoke(main, ["submit", target, "--target", "azure", "--input",
                                    "raw=azureml:defect-images:1", "--policy", "nope.yml",
                                    *flags])
    assert bad.exit_code == 2 and "cannot read policy nope.yml" in bad.output
    assert azureml.pipelines == []   # refused before anything was sent
    done = CliRunner().invoke(main, ["submit", target, "--target", "azure", "--input",
                                     "raw=azureml:defect-images:1", "--policy", "policy.yml",
                                     *flags])
    assert done.exit_code == 0, done.output
    run_id = re.search(r"submitted run (\S+)", done.output).group(1)
    store = open_store()
    with store.session() as s:
        options = s.get(m.Run, run_id).options
    store.close()
    assert options["policy"] == {"name": "promotion-policy", "file": "policy.yml",
                                 "digest": digest_bytes(PROMOTION_POLICY.encode()),
                                 "text": PROMOTION_POLICY}
