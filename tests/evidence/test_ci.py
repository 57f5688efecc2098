"""CI provenance: read from each CI service's variables, recorded on runs, shown by `mlpipe
evidence`, carried in the bundle, and written into the Azure ML job's tags."""
import pytest

from mlpipe.evidence.storage.ci import FIELDS, ci_provenance, ci_tags, describe

GITHUB = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/defects",
          "GITHUB_SHA": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "GITHUB_REF": "refs/heads/main",
          "GITHUB_WORKFLOW": "train", "GITHUB_RUN_ID": "4242", "GITHUB_RUN_ATTEMPT": "2",
          "GITHUB_EVENT_NAME": "push", "GITHUB_ACTOR": "octocat",
          "GITHUB_SERVER_URL": "https://github.com"}


def test_github_actions():
    assert ci_provenance(GITHUB) == {
        "provider": "github-actions", "repository": "acme/defects",
        "commit": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "ref": "refs/heads/main",
        "workflow": "train", "run_id": "4242", "run_attempt": "2", "event": "push",
        "actor": "octocat",
        "url": "https://github.com/acme/defects/actions/runs/4242/attempts/2"}
    assert describe(ci_provenance(GITHUB)) == (
        "github-actions acme/defects run 4242 attempt 2 (push on refs/heads/main, workflow "
        "train, commit 1a2b3c4d5e6f) https://github.com/acme/defects/actions/runs/4242/"
        "attempts/2")


@pytest.mark.parametrize("env, expected", [
    ({"GITLAB_CI": "true", "CI_PROJECT_PATH": "acme/defects", "CI_COMMIT_SHA": "abc",
      "CI_COMMIT_REF_NAME": "main", "CI_PIPELINE_ID": "77", "CI_PIPELINE_SOURCE": "push",
      "CI_PIPELINE_URL": "https://gitlab.com/acme/defects/-/pipelines/77"},
     {"provider": "gitlab-ci", "repository": "acme/defects", "ref": "refs/heads/main",
      "run_id": "77", "event": "push", "url": "https://gitlab.com/acme/defects/-/pipelines/77"}),
    ({"TF_BUILD": "True", "BUILD_REPOSITORY_NAME": "defects", "BUILD_SOURCEVERSION": "abc",
      "BUILD_SOURCEBRANCH": "refs/heads/main", "BUILD_BUILDID": "9",
      "SYSTEM_COLLECTIONURI": "https://dev.azure.com/acme/", "SYSTEM_TEAMPROJECT": "ml",
      "BUILD_REASON": "IndividualCI"},
     {"provider": "azure-pipelines", "run_id": "9", "event": "IndividualCI",
      "url": "https://dev.azure.com/acme/ml/_build/results?buildId=9"}),
    ({"JENKINS_URL": "https://ci.acme", "JOB_NAME": "train", "BUILD_NUMBER": "12",
      "GIT_COMMIT": "abc", "BUILD_URL": "https://ci.acme/job/train/12/"},
     {"provider": "jenkins", "workflow": "train", "run_id": "12", "commit": "abc"}),
    ({"CIRCLECI": "true", "CIRCLE_PROJECT_USERNAME": "acme", "CIRCLE_PROJECT_REPONAME": "d",
      "CIRCLE_BRANCH": "main", "CIRCLE_SHA1": "abc"},
     {"provider": "circleci", "repository": "acme/d", "ref": "refs/heads/main"}),
])
def test_other_ci_services(env, expected):
    found = ci_provenance(env)
    assert set(found) == set(FIELDS)
    assert {k: found[k] for k in expected} == expected


def test_outside_ci_there_is_none():
    assert ci_provenance({"CI": "true", "GITHUB_ACTIONS": "false"}) is None
    assert ci_tags(None) == {}
    assert describe(None) == "not started by a CI service mlpipe recognises"


def test_tags_carry_every_known_field():
    tags = ci_tags(ci_provenance(GITHUB))
    assert tags["mlpipe.ci.url"] == "https://github.com/acme/defects/actions/runs/4242/attempts/2"
    assert set(tags) == {f"mlpipe.ci.{f}" for f in FIELDS}


@pytest.mark.slow
def test_a_run_under_github_actions_records_it_and_its_evidence_shows_it(tmp_path, monkeypatch):
    import json

    from bundle_project import BundleProject

    for key, value in GITHUB.items():
        monkeypatch.setenv(key, value)
    project = BundleProject(tmp_path / "project")
    candidate = project.submit()
    shown = project.evidence(candidate)
    assert shown.returncode == 0, shown.stderr
    assert ("  ci github-actions acme/defects run 4242 attempt 2 (push on refs/heads/main, "
            "workflow train, commit 1a2b3c4d5e6f) https://github.com/acme/defects/actions/"
            "runs/4242/attempts/2") in shown.stdout
    bundle = json.loads(project.evidence(candidate, "--format", "json").stdout)
    assert bundle["predicate"]["ci"] == ci_provenance(GITHUB)
    listed = json.loads(project.cli("runs", "--format", "json").stdout)
    assert listed["runs"][0]["ci"]["run_id"] == "4242"
