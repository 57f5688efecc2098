"""What the Azure tests share: the loopback workspace's names and a credential that fails."""
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
