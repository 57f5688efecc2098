"""Where a recorded artifact's bytes are read here: its root-relative key resolved in the
artifact roots, or the path it was recorded at; None when they live elsewhere (a URI) or are
gone. The one answer the bundle builder, the model's signature, promotion and export share.

Reads rows and files; writes nothing and hashes nothing.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from mlpipe.digests import is_reference
from mlpipe.evidence.storage.roots import ArtifactRoots, configured

if TYPE_CHECKING:
    from mlpipe.evidence.storage import models as m

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def remote(location: str | None) -> bool:
    """Whether ``location`` names storage elsewhere (a URI: ``azureml://...``, ``https://...``)
    rather than a path on this machine.

    Example:
        >>> remote("azureml://datastores/workspaceblobstore/paths/azureml/j1/model/")
        True
    """
    return bool(location) and _URI.match(location) is not None


def roots_or_configured(roots: ArtifactRoots | None) -> ArtifactRoots:
    """``roots``, or the roots this project's configuration names when None."""
    return roots if roots is not None else configured()


def artifact_path(a: m.Artifact, roots: ArtifactRoots | None = None) -> str | None:
    """Where an artifact's bytes are read here (``ArtifactRoots.local``): its key resolved in
    ``roots`` (default: the configured ones), else its recorded location."""
    key = getattr(a, "key", None)
    if key:
        found = roots_or_configured(roots).resolve(key, a.digest)
        return None if found is None else str(found)
    return roots_or_configured(roots).local(a.location, a.digest)


def model_path(candidate: m.CandidateRow, roots: ArtifactRoots | None = None) -> str | None:
    """Where the candidate's model files are read here, or None (remote, only a reference, or
    gone)."""
    model = candidate.model
    if remote(model.location) and not getattr(model, "key", None):
        return None
    if is_reference(model.digest):
        return None
    here = artifact_path(model, roots)
    return here if here is not None and os.path.exists(here) else None


__all__ = ["artifact_path", "model_path", "remote", "roots_or_configured"]
