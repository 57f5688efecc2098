"""Commands that carry an accepted candidate to where models are deployed from: promote
(register it into a model registry, gated on the recorded decision) and trace (from a
registered model back to its candidate and evidence). Parse, call
``mlpipe.commands.promoting.promote`` / ``mlpipe.evidence.qualification.trace.trace``, render.

Exit codes: 0 promoted / traced; 1 promotion refused (MP750-MP753) / the registered bytes are
not the candidate's (MP754, MP755) or its bundle does not verify; 2 usage.
"""
from __future__ import annotations

import sys

import click

from mlpipe.cli.base import EXIT_PROBLEMS, main, workspace_options


@main.command()
@click.argument("candidate")
@click.option("--registry", type=click.Choice(["mlflow", "azure"]), default="mlflow",
              show_default=True,
              help="mlflow: an MLflow Model Registry (the tracking URI from MLFLOW_TRACKING_URI "
                   "or --tracking-uri); azure: an Azure ML workspace's models (--workspace ... "
                   "or config.json).")
@click.option("--name", required=True, metavar="NAME", help="The registered model's name.")
@click.option("--alias", default=None, metavar="ALIAS",
              help="Point this alias (e.g. champion) at the version.")
@click.option("--policy", "policy_file", default=None, metavar="FILE",
              type=click.Path(dir_okay=False),
              help="The policy the promotion requires; the accepted decision must cite it "
                   "(default: the policy file the decision cites, re-read and re-judged).")
@click.option("--tracking-uri", default=None, metavar="URI",
              help="The MLflow tracking (and registry) URI; default MLFLOW_TRACKING_URI.")
@click.option("--by", default=None, metavar="NAME", help="Who promotes (recorded).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: for scripts.")
@workspace_options
def promote(candidate: str, registry: str, name: str, alias: str | None,
            policy_file: str | None, tracking_uri: str | None, by: str | None,
            fmt: str, **workspace: str | None) -> None:
    """Register CANDIDATE's model into a model registry, with its lineage as tags.

    Only a candidate whose newest decision accepts it, on a bundle its evidence still matches,
    against a policy it meets; otherwise refused (exit 1) with the code of what is missing
    (MP750 no decision, MP751 rejected, MP752 stale, MP753 policy). Promoting the same
    candidate again gives the same version. The promotion is recorded and sealed into the
    candidate's next bundle; the model card and ML-BOM are attached to the version.
    """
    from mlpipe.commands.promoting import promote as promote_candidate

    done = promote_candidate(candidate, name=name, registry=registry, alias=alias,
                             policy_file=policy_file, tracking_uri=tracking_uri, by=by,
                             workspace_service=lambda: _workspace_service(workspace))
    if fmt == "json":
        import json

        click.echo(json.dumps(done.document(), indent=2, sort_keys=True))
        return
    passed, reg = done.passed, done.registered
    verb = "registered" if reg.new else "already registered as"
    click.echo(f"promoted {done.done.candidate}: {verb} {reg.uri}"
               + (f" (alias {reg.alias})" if reg.alias else "") + f" at {reg.target}")
    if done.taken_from is not None:
        click.echo(f"  took over the promotion {done.taken_from} had begun and left: "
                   + ("it had not registered the model" if reg.new else
                      f"it registered {reg.uri} but did not record it; now recorded"))
    click.echo(f"  decision {passed.decision['verdict']} by {passed.decision['by']}, citing "
               f"bundle {passed.cited}; policy {passed.policy.name} {passed.policy.digest}")
    click.echo(f"  sealed {done.done.sealed} with the promotion (mlpipe evidence "
               f"{done.done.candidate})")


def _workspace_service(flags: dict[str, str | None]):
    """The MLClientService of the workspace ``--workspace``/``--resource-group``/
    ``--subscription``/``--config`` (or the environment, or config.json) names."""
    from mlpipe.backends.azure.service import MLClientService
    from mlpipe.backends.azure.workspace import resolve_workspace
    from mlpipe.cli.azure import service_for

    return service_for(MLClientService, resolve_workspace(
        subscription_id=flags.get("subscription_id"), resource_group=flags.get("resource_group"),
        workspace_name=flags.get("workspace_name"), config=flags.get("config")))


def model_card(candidate: str, output: str | None) -> None:
    """``mlpipe evidence C --format model-card -o FILE.md``: the card and, beside it, the ML-BOM."""
    from mlpipe.errors import UsageError
    from mlpipe.evidence.reports.card import write_card
    from mlpipe.evidence.storage.config import locate

    if output is None:
        raise UsageError("--format model-card writes two files (the Markdown card and its "
                         "CycloneDX ML-BOM); give the card's path with -o",
                         hint=f"run `mlpipe evidence {candidate} --format model-card -o "
                              f"model-card.md`")
    card = write_card(locate().url, candidate, output)
    click.echo(f"wrote {card.markdown} and {card.bom} (CycloneDX 1.7 ML-BOM), citing bundle "
               f"{card.bundle}")


@main.command()
@click.argument("model")
@click.option("--tracking-uri", default=None, metavar="URI",
              help="For models:/ URIs: the MLflow tracking URI; default MLFLOW_TRACKING_URI.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: for scripts.")
@workspace_options
def trace(model: str, tracking_uri: str | None, fmt: str, **workspace: str | None) -> None:
    """Trace a registered MODEL (models:/NAME/3, models:/NAME@champion, azureml:NAME:3) back to
    its candidate:
    download its bytes, hash them, find the candidate that has them, show its bundle, decision
    and promotion, and verify the bundle. Exit 1 when the bytes are not the promoted
    candidate's (MP754), no candidate has them (MP755), or the bundle does not verify."""
    from mlpipe.errors import UsageError
    from mlpipe.evidence.qualification.trace import Fetched, render
    from mlpipe.evidence.qualification.trace import trace as trace_model
    from mlpipe.evidence.storage.config import locate

    if model.startswith("azureml:"):
        from mlpipe.backends.azure import models as azure_models

        service = _workspace_service(workspace)

        def download(ref, into):
            name, version, tags, folder = azure_models.fetch(service, ref, into)
            return Fetched("azure", azure_models.target(service), name, version,
                           f"azureml:{name}:{version}", tags, folder)
    elif model.startswith("models:/"):
        from mlpipe.evidence.qualification.mlflowregistry import fetch
        from mlpipe.evidence.qualification.mlflowregistry import tracking_uri as configured_uri

        uri = configured_uri(tracking_uri)

        def download(ref, into):
            name, version, tags, folder = fetch(uri, ref, into)
            return Fetched("mlflow", uri, name, version, f"models:/{name}/{version}", tags,
                           folder)
    else:
        raise UsageError(f"{model!r} is not a registered model: expected models:/NAME/VERSION, "
                         f"models:/NAME@ALIAS or azureml:NAME:VERSION")

    found = trace_model(locate().url, model, download)
    if fmt == "json":
        import json

        click.echo(json.dumps(found.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo(render(found))
    sys.exit(0 if found.ok else EXIT_PROBLEMS)
