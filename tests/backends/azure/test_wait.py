"""``mlpipe submit --target azure --wait`` end to end on the loopback Azure ML service: the job
is followed while the service moves its steps (one change per look: ``Job.script``), then synced;
exit 0 when it completed, 1 when it failed or was canceled (naming the step, its status message
and where its logs are), 2 for usage and submission errors. Also the ``--format json``
documents of submit.
"""
import io
import json
import re

import pytest
from click.testing import CliRunner

from backends.azure.azure_helpers import stage
from mlpipe.cli import azure as cli_azure
from mlpipe.cli import main
from mlpipe.cli.progress import LiveProgress, PlainProgress, live_terminal, progress_view

WORKSPACE = ["--workspace", "ws-defects", "--resource-group", "rg-ml", "--subscription",
             "00000000-0000-0000-0000-000000000000"]


@pytest.fixture
def mlpipe(azureml, azureml_project, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPIPE_STORE_URL", f"sqlite:///{tmp_path / 'store.sqlite'}")
    monkeypatch.setattr(cli_azure, "_credential", azureml.credential)

    def run(*args, pipeline="flat"):
        argv = [a.format(project=azureml_project) for a in args]
        if argv and argv[0] == "submit":
            argv[1:1] = [f"{azureml_project / 'lbflow.py'}:{pipeline}", "--target", "azure",
                         *WORKSPACE, "--input", "raw=azureml:defect-images:1"]
        return CliRunner().invoke(main, argv, catch_exceptions=False)

    return run


def test_wait_follows_the_job_syncs_it_and_exits_0_when_it_completed(mlpipe, azureml):
    earlier = mlpipe("submit")
    assert earlier.exit_code == 0, earlier.output
    original = azureml.last_job.child("prepare").start().log_metric("images", 300).complete()
    azureml.fail(429, r"^GET .*/jobs/[^/]+$", times=2, retry_after=0)  # retried by the client
    stage(azureml,
          lambda p: p.child("prepare").reuse(original),
          lambda p: p.child("lb_train.fit").start(),
          lambda p: p.child("lb_train.fit").log_metric("loss", 0.4).complete(),
          lambda p: p.child("lb_train").complete(),
          lambda p: p.child("evaluate").start(),
          lambda p: (p.child("evaluate").complete(), p.complete()))
    result = mlpipe("submit", "--wait", "--poll-interval", "0", pipeline="nested")
    # the job completed; its candidate's outputs left no step record (MP660, an error): the
    # findings gate says 1 after the whole story was told
    assert result.exit_code == 1, result.output
    assert re.search(r"^error: candidate c-[0-9a-f]{10} carries 2 findings of severity error or "
                     r"worse \(MP660\): it is not ready for review \(--fail-on error\)$",
                     result.output, re.M), result.output
    job = azureml.last_job
    lines = result.output.splitlines()
    assert lines[0].startswith("submitted run r-") and f"Azure ML job {job.name}" in lines[0]
    changes = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in lines
               if re.match(r"^\d\d:\d\d:\d\d ", line)]
    # the first look already saw the first change: prepare reused, the pipeline running
    assert re.match(rf"pipeline {job.name} +Running$", changes[0])
    assert re.match(rf"prepare +Completed  \(reused {original.name}, took \d+s\)$", changes[1])
    assert [c.split()[0] for c in changes[1:]] == [
        "prepare", "lb_train.fit", "lb_train.fit", "evaluate", "pipeline", "evaluate"]
    assert re.search(r"^run r-[0-9a-f]{10} succeeded  \(Azure ML job .*: Completed\)$",
                     result.output, re.M)
    assert re.search(r"^candidate c-[0-9a-f]{10}$", result.output, re.M)
    gets = [r.status for r in azureml.requests if r.method == "GET"
            and r.path.endswith(f"/jobs/{job.name}")]
    assert gets[:3] == [429, 429, 200]
    shown = mlpipe("show", re.search(r"run (r-[0-9a-f]{10})", lines[0]).group(1))
    assert f"prepare: reused Azure ML job {original.name}" in shown.output


def test_wait_exits_1_naming_the_failed_step_its_message_and_its_logs(mlpipe, azureml):
    stage(azureml,
          lambda p: p.child("prepare").start(),
          lambda p: p.child("prepare").complete(),
          lambda p: p.child("fit").start(),
          lambda p: (p.child("fit").fail("UserError: Execution failed. User process 'python' "
                                         "exited with status code 1."), p.fail("failed")))
    result = mlpipe("submit", "--wait", "--poll-interval", "0")
    assert result.exit_code == 1, result.output
    fit = azureml.last_job.child("fit")
    assert re.search(r"^run r-[0-9a-f]{10} failed  \(Azure ML job .*: Failed\)$", result.output,
                     re.M)
    assert (f"  step fit Failed: UserError: Execution failed. User process 'python' exited "
            f"with status code 1.\n    logs: https://ml.azure.test/runs/{fit.name}?wsid="
            in result.output)
    assert "candidate" not in result.output.split("logs:")[1]


def test_wait_exits_1_when_the_job_was_canceled(mlpipe, azureml):
    stage(azureml, lambda p: p.child("prepare").start(),
          lambda p: (p.child("prepare").cancel(), p.cancel()))
    result = mlpipe("submit", "--wait", "--poll-interval", "0")
    assert result.exit_code == 1, result.output
    assert re.search(r"^run r-[0-9a-f]{10} interrupted  \(Azure ML job .*: Canceled\)$",
                     result.output, re.M)
    assert "  step prepare Canceled: Canceled by the user" in result.output


def test_submission_success_is_not_reported_as_completion(mlpipe, azureml):
    result = mlpipe("submit")
    assert result.exit_code == 0, result.output
    assert "(submitted, not completed)" in result.output
    assert "succeeded" not in result.output


@pytest.mark.parametrize("args, message", [
    (["--poll-interval", "1"], r"error: --poll-interval applies to --wait only"),
    (["--poll-interval", "-1", "--wait"], r"Invalid value for '--poll-interval'"),
])
def test_wait_usage_errors_exit_2(mlpipe, azureml, args, message):
    result = mlpipe("submit", *args)
    assert result.exit_code == 2 and re.search(message, result.output), result.output
    assert azureml.pipelines == []


def test_wait_on_a_local_run_is_a_usage_error(mlpipe, azureml_project):
    result = CliRunner().invoke(main, ["submit", f"{azureml_project / 'lbflow.py'}:flat",
                                       "--wait"])
    assert result.exit_code == 2
    assert "error: --wait apply to --target azure only" in result.output


def test_a_submission_error_exits_2_and_nothing_is_followed(mlpipe, azureml):
    azureml.fail(500, r"^PUT .*/jobs/", times=None)
    result = mlpipe("submit", "--wait", "--poll-interval", "0")
    assert result.exit_code == 2
    assert result.output.startswith("error: Azure ML service error while trying to submit the "
                                    "pipeline job: 500 InternalServerError")


def test_losing_the_service_while_waiting_says_the_job_goes_on(mlpipe, azureml):
    stage(azureml, lambda p: p.child("prepare").start(),
          lambda p: azureml.fail(503, r"/children$", times=None))
    result = mlpipe("submit", "--wait", "--poll-interval", "0")
    job = azureml.last_job
    assert result.exit_code == 2
    assert re.search(rf"^error: Azure ML service error while trying to list the child jobs of "
                     rf"'{job.name}': 503 ServiceUnavailable: .* \(5 tries\); Azure ML job "
                     rf"{job.name} goes on\n  help: follow it with `mlpipe sync r-[0-9a-f]{{10}}"
                     r"` once Azure ML is reachable$", result.output, re.M)


# --- JSON --------------------------------------------------------------------------------------

SUBMIT_KEYS = {"format", "run_id", "target", "pipeline", "pipeline_digest", "status",
               "job_name", "studio_url", "azure_status", "experiment", "workspace",
               "candidate_id", "failed_steps", "ci", "findings", "fail_on", "failing_findings"}


def test_submit_json_is_one_document_on_stdout_with_the_job_and_its_url(mlpipe, azureml,
                                                                      monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/defects")
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    result = mlpipe("submit", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # the progress lines went to stderr
    job = azureml.last_job
    assert set(document) == SUBMIT_KEYS
    assert document["format"] == "mlpipe.submit/1"
    assert (document["target"], document["status"], document["azure_status"]) == (
        "azure", "submitted", "NotStarted")
    assert document["job_name"] == job.name and document["pipeline"] == "lb-flat"
    assert document["studio_url"].startswith(f"https://ml.azure.test/runs/{job.name}")
    assert document["workspace"].endswith("/workspaces/ws-defects")
    assert document["ci"]["repository"] == "acme/defects"
    assert job.tags["mlpipe.ci.run_id"] == "4242"


def test_submit_wait_json_carries_the_outcome_and_the_failed_steps(mlpipe, azureml):
    stage(azureml, lambda p: (p.child("prepare").fail("UserError: boom"), p.fail("failed")))
    result = mlpipe("submit", "--wait", "--poll-interval", "0", "--format", "json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    prepare = azureml.last_job.child("prepare")
    assert (document["status"], document["azure_status"]) == ("failed", "Failed")
    [failed] = document["failed_steps"]
    # run history gives a child "services": {} (recorded: test_pipeline_job_child_run_download):
    # its studio page is the pipeline job's, addressed by the child's run id
    assert document["studio_url"].startswith(f"https://ml.azure.test/runs/"
                                             f"{azureml.last_job.name}?wsid=")
    assert failed.pop("log_url") == document["studio_url"].replace(
        f"/runs/{azureml.last_job.name}", f"/runs/{prepare.name}")
    assert failed == {"step": "prepare", "job_name": prepare.name, "status": "Failed",
                      "message": "UserError: boom"}


# --- the views -------------------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_the_live_view_and_a_ci_log_plain_lines(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert live_terminal(Terminal()) and not live_terminal(io.StringIO())
    view = progress_view(Terminal(), title="run r-1")
    assert isinstance(view, LiveProgress)
    view.close()
    monkeypatch.setenv("CI", "true")
    assert not live_terminal(Terminal())
    assert isinstance(progress_view(Terminal()), PlainProgress)


def test_the_live_view_shows_each_step_its_status_reuse_and_time(azureml, service, project_spec):
    from backends.azure.azure_helpers import WS
    from mlpipe.backends.azure.submit import submit_to_azure
    from mlpipe.backends.azure.sync import job_progress

    run = submit_to_azure(project_spec("flat"), WS, service, inputs={"raw": "azureml:x:1"})
    job = azureml.last_job
    original = job.child("fit").start().complete()
    job.child("prepare").reuse(original)
    job.child("evaluate").start()
    screen = Terminal()
    view = LiveProgress(screen, title="run r-1")
    view(job_progress(run.job_name, service))
    view.close()
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", screen.getvalue())
    assert f"run r-1  Azure ML job {run.job_name}: Running" in text
    assert re.search(rf"prepare +│ Completed +│ {original.name}", text)
    assert re.search(r"evaluate +│ Running +│ +│ \d+s", text)
