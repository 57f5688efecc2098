"""Which references can change behind the same text: an environment without a version, an
``@latest`` or other label, an image tag without a digest, an unversioned data asset, a URL or
datastore path; and what a registered asset reference names, read as Azure ML reads it
(``azureml:NAME:V``, ``azureml:NAME@LABEL``, an ARM id, a registry URI). Pure string rules;
nothing is resolved or fetched here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlpipe.spec import Environment

#: How a step whose component is registered (``azureml:train:3``, a registry URI) starts its
#: ``azure_only`` reason: mlpipe sees only what the job binds, not the component's ports.
REGISTERED_COMPONENT = "a registered component"
_URL = re.compile(r"^(?P<scheme>https?|s3|gs|wasbs?|abfss?|adl|hdfs|ftp|azureml)://", re.I)
_PINNED_ASSET = re.compile(r"/data/[^/]+/versions/(?!latest/?$)[^/]+/?$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$", re.I)
#: The asset kinds a reference names, as Azure ML's URIs spell them.
ASSET_KINDS = ("environments", "components", "models", "data")
_SHORT = re.compile(r"^azureml:(?P<name>[A-Za-z0-9_][A-Za-z0-9_.-]*)"
                    r"(?::(?P<version>[^:@/]+)|@(?P<label>[A-Za-z0-9_.-]+))?$")
_REGISTRY = re.compile(r"^azureml://registries/(?P<registry>[^/]+)/(?P<kind>environments|"
                       r"components|models|data)/(?P<name>[^/@:]+)(?:/versions/(?P<version>"
                       r"[^/]+)|/labels/(?P<label>[^/]+))?/?$")
_ARM_ID = re.compile(r"^azureml:/subscriptions/[^/]+/resource[gG]roups/[^/]+/providers/"
                     r"Microsoft\.MachineLearningServices/workspaces/[^/]+/(?P<kind>environments|"
                     r"components|models|data)/(?P<name>[^/]+)/versions/(?P<version>[^/]+)$")


@dataclass(frozen=True, slots=True)
class AssetReference:
    """A registered asset as Azure ML resolves it: by ``version``, or by ``label`` (through the
    versions list, newest first), in the workspace or in ``registry``."""

    kind: str
    name: str
    version: str | None = None
    label: str | None = None
    registry: str | None = None

    @property
    def text(self) -> str:
        """The reference as a job file spells it (``azureml:NAME:V``, ``azureml:NAME@L``, the
        registry URI's ``.../versions/V`` or ``.../labels/L``)."""
        if self.registry is not None:
            base = f"azureml://registries/{self.registry}/{self.kind}/{self.name}"
            return f"{base}/versions/{self.version}" if self.version else \
                f"{base}/labels/{self.label or 'latest'}"
        return f"azureml:{self.name}:{self.version}" if self.version else \
            f"azureml:{self.name}@{self.label or 'latest'}"


def asset_reference(text: object, kind: str | None = None) -> AssetReference | None:
    """The registered asset ``text`` names, or None for anything else (paths, URLs, datastore
    URIs, inline definitions). ``azureml:NAME`` alone is ``@latest``; ``kind`` is the kind a
    short form (which does not say it) is read as.

    Example:
        >>> asset_reference("azureml://registries/azureml/environments/sklearn-1.5/labels/latest")
        AssetReference(kind='environments', name='sklearn-1.5', version=None, label='latest', \
registry='azureml')
    """
    if not isinstance(text, str):
        return None
    text = text.strip()
    m = _REGISTRY.match(text)
    if m is not None:
        return AssetReference(m["kind"], m["name"], m["version"],
                              None if m["version"] else (m["label"] or "latest"), m["registry"])
    m = _ARM_ID.match(text)
    if m is not None:
        return AssetReference(m["kind"], m["name"], m["version"])
    m = _SHORT.match(text)
    if m is None:
        return None
    return AssetReference(kind or "data", m["name"], m["version"],
                          None if m["version"] else (m["label"] or "latest"))


def environment_reference(env: Environment) -> AssetReference | None:
    """The registered environment ``env`` names (its name may carry the version or label, as
    ``azureml:NAME@latest`` or a registry URI; ``version`` may be ``V`` or ``@LABEL``); None
    for an inline one (an image or a conda file) or one with no name."""
    if env.image is not None or env.conda_file is not None or not env.name:
        return None
    name = env.name.strip()
    if not name.startswith("azureml:"):
        name = f"azureml:{name}"
    ref = asset_reference(name, "environments")
    if ref is None or ref.kind != "environments":
        return None
    explicit = ref.version is not None or "@" in name or "/labels/" in name
    if explicit or not env.version:
        return ref
    own = env.version
    if own.startswith("@"):
        return AssetReference("environments", ref.name, None, own[1:] or "latest", ref.registry)
    return AssetReference("environments", ref.name, own, None, ref.registry)


def is_url(text: str) -> bool:
    """Whether ``text`` names remote data (``https://``, ``azureml://``, ``abfss://``...) or an
    Azure ML asset (``azureml:name:1``)."""
    return bool(_URL.match(text)) or text.startswith("azureml:")


def data_reference_moves(reference: str) -> str | None:
    """Why the data behind ``reference`` can change while its text stays the same, or None
    when it pins one version (``azureml:images:3``) or is a local path (which mlpipe
    snapshots by content before a run).

    Example:
        >>> data_reference_moves("azureml:images@latest")
        "the label 'latest' names whichever version carries it when the job is submitted"
    """
    text = reference.strip()
    if text.startswith("azureml:") and not text.startswith("azureml://"):
        body = text[len("azureml:"):]
        if body.startswith("/"):  # an ARM id: .../data/NAME/versions/V
            if _PINNED_ASSET.search(body):
                return None
            return "a data asset named without a version resolves to its latest version"
        if "@" in body:
            label = body.rsplit("@", 1)[1]
            return (f"the label {label!r} names whichever version carries it when the job is "
                    f"submitted")
        name, sep, version = body.rpartition(":")
        if not (sep and name and version):
            return "a data asset named without a version resolves to its latest version"
        if version == "latest":
            return "version 'latest' names whichever version is newest when the job is submitted"
        return None
    m = _URL.match(text)
    if m is None:
        return None
    if m.group("scheme").lower() == "azureml":
        if _PINNED_ASSET.search(text):
            return None
        if "/versions/latest" in text:
            return "version 'latest' names whichever version is newest when the job is submitted"
        return "a datastore path: the files under it can change between runs"
    return f"a {m.group('scheme').lower()}:// location: what it serves can change between runs"


def image_moves(image: str) -> str | None:
    """Why a Docker image reference can change behind its text (a tag, or no tag), or None
    when it is pinned by ``@sha256:`` digest.

    Example:
        >>> image_moves("mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest")
        "tag 'latest' is moved to newer builds"
    """
    text = image.strip()
    if _DIGEST.search(text):
        return None
    last = text.rsplit("/", 1)[-1]
    if ":" not in last:
        return "no tag means 'latest', which is moved to newer builds"
    tag = last.rsplit(":", 1)[1]
    if tag == "latest":
        return "tag 'latest' is moved to newer builds"
    return f"tag {tag!r} can be pushed again with other content"


def as_written(env: Environment) -> Environment:
    """``env`` with a version or label its name carries (``azureml:NAME:3``,
    ``azureml:NAME@latest``, a registry URI's ``/versions/3`` or ``/labels/latest``) moved to
    its ``version`` (``3``, ``@latest``) and its name left bare, as a job file's reference is
    read; any other ``env`` as it is.

    Example:
        >>> as_written(Environment("azureml:sklearn-env@latest"))
        Environment(name='sklearn-env', version='@latest', image=None, conda_file=None, \
variables=())
    """
    from dataclasses import replace

    ref = environment_reference(env)
    carried = env.version is None and ref is not None and (
        ref.version is not None or "@" in env.name or "/labels/" in env.name)
    if ref is None or not carried or (env.name.startswith("azureml:/")
                                      and not env.name.startswith("azureml://")):
        return env
    base = (f"azureml://registries/{ref.registry}/environments/{ref.name}" if ref.registry
            else ref.name)
    return replace(env, name=base, version=ref.version or f"@{ref.label}")


def environment_text(env: "Environment", version: str | None = None) -> str:
    """How a job file names the registered environment ``env`` (with ``version`` in place of
    its own, where given): ``azureml:NAME:V``, ``azureml:NAME@LABEL``, or the registry URI's
    ``.../versions/V`` or ``.../labels/LABEL``; no version at all reads as ``@latest``.

    Example:
        >>> environment_text(Environment("azureml://registries/azureml/environments/sklearn",
        ...                              version="@latest"), "N")
        'azureml://registries/azureml/environments/sklearn/versions/N'
    """
    ref = environment_reference(env)
    arm_id = env.name.startswith("azureml:/") and not env.name.startswith("azureml://")
    if ref is not None and not arm_id:  # an ARM id stays as written
        if version:
            ref = AssetReference(ref.kind, ref.name, None if version.startswith("@") else version,
                                 version[1:] if version.startswith("@") else None, ref.registry)
        return ref.text
    version = version or env.version or "@latest"
    if env.name.startswith("azureml://"):
        return (f"{env.name}/labels/{version[1:]}" if version.startswith("@")
                else f"{env.name}/versions/{version}")
    name = env.name.removeprefix("azureml:")
    return f"azureml:{name}{version}" if version.startswith("@") else f"azureml:{name}:{version}"


__all__ = ["ASSET_KINDS", "REGISTERED_COMPONENT", "AssetReference", "as_written",
           "asset_reference",
           "data_reference_moves", "environment_reference", "environment_text", "image_moves",
           "is_url"]
