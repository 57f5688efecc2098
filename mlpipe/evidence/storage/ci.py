"""CI provenance: which repository event and workflow run started this mlpipe process.

Read from the variables common CI services set (GitHub Actions, GitLab CI, Azure Pipelines,
Jenkins, CircleCI, Bitbucket Pipelines, Buildkite); recorded on every run, carried in the
evidence bundle and in an Azure ML job's tags, so that a model candidate can be traced back to
the workflow run that submitted it. Reads the environment only; writes nothing.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

#: The fields of a provenance record, in order (every one present, None where the CI does not
#: say): the CI service, the repository, the commit, the ref, the workflow (pipeline) name,
#: the workflow run's id and attempt, the event that started it, who started it, its URL.
FIELDS = ("provider", "repository", "commit", "ref", "workflow", "run_id", "run_attempt",
          "event", "actor", "url")
#: The Azure ML job tag of each field (``mlpipe.ci.provider`` ...).
TAG_PREFIX = "mlpipe.ci."


def _github(env: Mapping[str, str]) -> dict[str, str | None]:
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repo, run_id = env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    attempt = env.get("GITHUB_RUN_ATTEMPT")
    url = None
    if repo and run_id:
        url = f"{server}/{repo}/actions/runs/{run_id}" + (f"/attempts/{attempt}" if attempt
                                                           else "")
    return {"provider": "github-actions", "repository": repo, "commit": env.get("GITHUB_SHA"),
            "ref": env.get("GITHUB_REF"), "workflow": env.get("GITHUB_WORKFLOW"),
            "run_id": run_id, "run_attempt": attempt, "event": env.get("GITHUB_EVENT_NAME"),
            "actor": env.get("GITHUB_ACTOR"), "url": url}


def _gitlab(env: Mapping[str, str]) -> dict[str, str | None]:
    ref = env.get("CI_COMMIT_REF_NAME")
    return {"provider": "gitlab-ci", "repository": env.get("CI_PROJECT_PATH"),
            "commit": env.get("CI_COMMIT_SHA"),
            "ref": (f"refs/tags/{ref}" if env.get("CI_COMMIT_TAG") else f"refs/heads/{ref}")
            if ref else None, "workflow": env.get("CI_JOB_NAME"),
            "run_id": env.get("CI_PIPELINE_ID"), "run_attempt": env.get("CI_JOB_ID"),
            "event": env.get("CI_PIPELINE_SOURCE"), "actor": env.get("GITLAB_USER_LOGIN"),
            "url": env.get("CI_PIPELINE_URL")}


def _azure_pipelines(env: Mapping[str, str]) -> dict[str, str | None]:
    base, project = env.get("SYSTEM_COLLECTIONURI"), env.get("SYSTEM_TEAMPROJECT")
    build = env.get("BUILD_BUILDID")
    url = (f"{base.rstrip('/')}/{project}/_build/results?buildId={build}"
           if base and project and build else None)
    return {"provider": "azure-pipelines", "repository": env.get("BUILD_REPOSITORY_NAME"),
            "commit": env.get("BUILD_SOURCEVERSION"), "ref": env.get("BUILD_SOURCEBRANCH"),
            "workflow": env.get("BUILD_DEFINITIONNAME"), "run_id": build,
            "run_attempt": env.get("SYSTEM_JOBATTEMPT"), "event": env.get("BUILD_REASON"),
            "actor": env.get("BUILD_REQUESTEDFOR"), "url": url}


def _jenkins(env: Mapping[str, str]) -> dict[str, str | None]:
    return {"provider": "jenkins", "repository": env.get("GIT_URL"),
            "commit": env.get("GIT_COMMIT"), "ref": env.get("GIT_BRANCH"),
            "workflow": env.get("JOB_NAME"), "run_id": env.get("BUILD_NUMBER"),
            "run_attempt": None, "event": None, "actor": env.get("BUILD_USER_ID"),
            "url": env.get("BUILD_URL")}


def _circleci(env: Mapping[str, str]) -> dict[str, str | None]:
    user, repo = env.get("CIRCLE_PROJECT_USERNAME"), env.get("CIRCLE_PROJECT_REPONAME")
    return {"provider": "circleci", "repository": f"{user}/{repo}" if user and repo else None,
            "commit": env.get("CIRCLE_SHA1"),
            "ref": (f"refs/tags/{env['CIRCLE_TAG']}" if env.get("CIRCLE_TAG") else
                    f"refs/heads/{env['CIRCLE_BRANCH']}" if env.get("CIRCLE_BRANCH") else None),
            "workflow": env.get("CIRCLE_JOB"), "run_id": env.get("CIRCLE_WORKFLOW_ID"),
            "run_attempt": env.get("CIRCLE_BUILD_NUM"), "event": None,
            "actor": env.get("CIRCLE_USERNAME"), "url": env.get("CIRCLE_BUILD_URL")}


def _bitbucket(env: Mapping[str, str]) -> dict[str, str | None]:
    return {"provider": "bitbucket-pipelines", "repository": env.get("BITBUCKET_REPO_FULL_NAME"),
            "commit": env.get("BITBUCKET_COMMIT"),
            "ref": (f"refs/tags/{env['BITBUCKET_TAG']}" if env.get("BITBUCKET_TAG") else
                    f"refs/heads/{env['BITBUCKET_BRANCH']}" if env.get("BITBUCKET_BRANCH")
                    else None),
            "workflow": env.get("BITBUCKET_STEP_UUID"),
            "run_id": env.get("BITBUCKET_BUILD_NUMBER"), "run_attempt": None,
            "event": "pull_request" if env.get("BITBUCKET_PR_ID") else None,
            "actor": None, "url": None}


def _buildkite(env: Mapping[str, str]) -> dict[str, str | None]:
    return {"provider": "buildkite", "repository": env.get("BUILDKITE_REPO"),
            "commit": env.get("BUILDKITE_COMMIT"),
            "ref": f"refs/heads/{env['BUILDKITE_BRANCH']}" if env.get("BUILDKITE_BRANCH")
            else None, "workflow": env.get("BUILDKITE_PIPELINE_SLUG"),
            "run_id": env.get("BUILDKITE_BUILD_NUMBER"),
            "run_attempt": env.get("BUILDKITE_RETRY_COUNT"), "event": env.get("BUILDKITE_SOURCE"),
            "actor": env.get("BUILDKITE_BUILD_CREATOR"), "url": env.get("BUILDKITE_BUILD_URL")}


#: Each CI service: the variable that says a process runs under it, and its reader.
PROVIDERS = (("GITHUB_ACTIONS", _github), ("GITLAB_CI", _gitlab),
             ("TF_BUILD", _azure_pipelines), ("CIRCLECI", _circleci),
             ("BITBUCKET_BUILD_NUMBER", _bitbucket), ("BUILDKITE", _buildkite),
             ("JENKINS_URL", _jenkins))


def ci_provenance(env: Mapping[str, str] | None = None) -> dict[str, str | None] | None:
    """The CI run this process belongs to, or None outside a CI service mlpipe knows.

    Example:
        >>> ci_provenance({"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/defects",
        ...                "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "1"})["url"]
        'https://github.com/acme/defects/actions/runs/42/attempts/1'
    """
    env = os.environ if env is None else env
    for flag, read in PROVIDERS:
        if env.get(flag) and (flag != "GITHUB_ACTIONS" or env[flag].lower() == "true"):
            found = read(env)
            return {key: (str(found.get(key)) if found.get(key) not in (None, "") else None)
                    for key in FIELDS}
    return None


def ci_tags(provenance: Mapping[str, str | None] | None) -> dict[str, str]:
    """The Azure ML job tags that carry ``provenance`` (``mlpipe.ci.FIELD``), empty outside CI.

    Example:
        >>> ci_tags({"provider": "github-actions", "run_id": "42", "url": None})
        {'mlpipe.ci.provider': 'github-actions', 'mlpipe.ci.run_id': '42'}
    """
    return {TAG_PREFIX + key: str(value) for key, value in (provenance or {}).items()
            if value is not None}


def describe(provenance: Mapping[str, str | None] | None) -> str:
    """One line for a reader: ``github-actions acme/defects run 42 attempt 1 (push on
    refs/heads/main, workflow train, commit 1a2b3c4d5e6f) URL``."""
    if not provenance:
        return "not started by a CI service mlpipe recognises"
    p = provenance
    head = " ".join(x for x in (p.get("provider"), p.get("repository")) if x)
    run = (f" run {p['run_id']}" if p.get("run_id") else "") + (
        f" attempt {p['run_attempt']}" if p.get("run_attempt") else "")
    what = ", ".join(x for x in (
        f"{p['event']} on {p['ref']}" if p.get("event") and p.get("ref") else
        p.get("event") or p.get("ref"),
        f"workflow {p['workflow']}" if p.get("workflow") else None,
        f"commit {(p.get('commit') or '')[:12]}" if p.get("commit") else None) if x)
    return f"{head}{run}" + (f" ({what})" if what else "") + (f" {p['url']}" if p.get("url")
                                                              else "")
