"""What the Azure tests share: the loopback workspace's names, a credential that fails, and a
way to stage the life of the next submitted job."""
import pathlib

from azure.core.exceptions import ClientAuthenticationError

from mlpipe.backends.azure.workspace import Workspace

ROOT = pathlib.Path(__file__).resolve().parents[3]
WS = Workspace("00000000-0000-0000-0000-000000000000", "rg-ml", "ws-defects")


class NoCredential:
    """What DefaultAzureCredential raises where no credential works."""

    def get_token(self, *scopes, **kwargs):
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token "
                                        "from the included credentials.")


def stage(azureml, *steps):
    """Stage the next submitted job's life: each step runs on one GET of the job (so a client
    that follows it, ``--wait``, sees the life unfold whatever its timing)."""
    staged = []

    def hook(method, path):
        job = azureml.last_job
        if not staged and not job._script and not getattr(job, "_staged", False):
            job._staged = True
            staged.append(job)
            job.script(*steps)

    azureml.on(r"^GET .*/jobs/[^/]+$", hook)
