"""Commands for qualification reviewers that decide: qualify (judge a policy, decide nothing)
and review (record a decision). Parse, call ``mlpipe.evidence.qualification.policy`` /
``review``, render.

Exit codes: 0 the policy passed / the decision was recorded; 1 a criterion unmet / the decision
refused (MP715 stale bundle, MP716 acceptance refused); 2 a bad policy file or usage.
"""
from __future__ import annotations

import sys

import click

from mlpipe.cli.base import EXIT_PROBLEMS, main
from mlpipe.cli.keys import load_configured_trust, trust_option


@main.command()
@click.argument("candidate")
@click.option("--policy", "policy_file", default=None, metavar="FILE",
              type=click.Path(dir_okay=False),
              help="The policy YAML (docs/review.md), e.g. policies/defect-classifier.yml; "
                   "default: the one the candidate's run committed to before it ran.")
@click.option("--deviation", "why", default=None, metavar="WHY",
              help="Judge --policy although the run committed to another one, saying why "
                   "(with --by); `review` records such a deviation, qualify only shows it.")
@click.option("--by", "by", default=None, metavar="NAME", help="Who deviates (--deviation).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: for scripts.")
@trust_option
def qualify(candidate: str, policy_file: str | None, why: str | None, by: str | None,
            fmt: str, trust_file: str | None) -> None:
    """Judge CANDIDATE's newest sealed bundle against a policy (by default the one its run
    committed to before it ran): a pass/fail table per criterion. Records nothing; exit 1 when
    a criterion is unmet, when --policy is not the committed one and no --deviation says why,
    or (with a trust policy) when the candidate's evidence does not verify under it."""
    from mlpipe.evidence.qualification.commitment import qualify as judge
    from mlpipe.evidence.qualification.commitment import render_choice
    from mlpipe.evidence.qualification.policy import load_policy, render_qualification
    from mlpipe.evidence.storage.config import locate

    policy = None if policy_file is None else load_policy(policy_file)
    trust = load_configured_trust(trust_file)
    if trust is not None:
        from mlpipe.evidence.qualification.review import require_trusted

        require_trusted(locate().url, candidate, trust)
    result, choice = judge(locate().url, candidate, policy, by=by, why=why)
    if fmt == "json":
        import json

        click.echo(json.dumps({**result.to_dict(), **choice.cited()}, indent=2,
                              sort_keys=True))
    else:
        lines = render_qualification(result).split("\n")   # ..., the table, "", the verdict
        click.echo("\n".join([*lines[:-2], *render_choice(choice), *lines[-2:]]))
    sys.exit(0 if result.passed else EXIT_PROBLEMS)


@main.command()
@click.argument("candidate")
@click.option("--accept", "verdict", flag_value="accepted", help="Accept the candidate.")
@click.option("--reject", "verdict", flag_value="rejected", help="Reject the candidate.")
@click.option("--by", "by", default=None, metavar="NAME",
              help="Who decides, in free text (an unsigned decision); with --key, the trust "
                   "policy names the reviewer.")
@click.option("--key", "key_file", default=None, metavar="FILE", envvar="MLPIPE_REVIEW_KEY",
              type=click.Path(dir_okay=False),
              help="Sign the decision with this private key (default MLPIPE_REVIEW_KEY); the "
                   "reviewer is the key's identity in the trust policy.")
@click.option("--note", required=True, metavar="TEXT", help="Why, in your words.")
@click.option("--policy", "policy_file", default=None, metavar="FILE",
              type=click.Path(dir_okay=False),
              help="Judge this policy first and record its result with the decision; "
                   "--accept is refused when it is not met. Default: the policy the run "
                   "committed to before it ran.")
@click.option("--deviation", "why", default=None, metavar="WHY",
              help="Judge --policy although the run committed to another one: recorded with "
                   "the decision (its digest, who, why) and shown on every view.")
@click.option("--bundle", default=None, metavar="DIGEST",
              help="The bundle digest you read; refused unless it is the newest sealed one.")
@trust_option
def review(candidate: str, verdict: str | None, by: str | None, key_file: str | None,
           note: str, policy_file: str | None, why: str | None, bundle: str | None,
           trust_file: str | None) -> None:
    """Record a decision on CANDIDATE, citing the exact bundle digest it was made on.

    Refused (exit 1) when the store changed since the newest bundle was sealed (re-seal with
    `mlpipe evidence C --rebuild` and read it first), and --accept when the bundle has an
    error-severity finding or the --policy is not met. With a trust policy, refused too when
    the candidate's evidence does not verify under it, when --key may not decide, or when its
    identity submitted the run. The next bundle, sealed with the decision, records it.
    """
    from mlpipe.errors import UsageError
    from mlpipe.evidence.qualification.review import record_decision
    from mlpipe.evidence.storage.config import locate

    if verdict is None:
        raise UsageError("a decision is --accept or --reject; neither was given",
                         hint=f"run `mlpipe review {candidate} --accept|--reject --by NAME "
                              f"--note TEXT`")
    policy = None
    if policy_file is not None:
        from mlpipe.evidence.qualification.policy import load_policy

        policy = load_policy(policy_file)
    key = None
    if key_file is not None:
        from mlpipe.evidence.signatures.keys import load_private

        key = load_private(key_file)
    elif by is None:
        raise UsageError("a decision names its reviewer: --key FILE (signed) or --by NAME "
                         "(unsigned); neither was given",
                         hint=f"run `mlpipe review {candidate} --accept --key KEY.pem --note TEXT`")
    done = record_decision(locate().url, candidate, verdict=verdict, by=by, note=note,
                           policy=policy, deviation=why, bundle=bundle, key=key,
                           trust=load_configured_trust(trust_file))
    signed = f" (signed, key {done.signer[:16]})" if done.signer else ""
    click.echo(f"{done.verdict} candidate {done.candidate} by {done.by}{signed}, citing "
               f"bundle {done.cited}")
    click.echo(f"  sealed {done.sealed} with the decision (mlpipe evidence {done.candidate})")
