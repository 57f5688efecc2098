"""Azure ML transport kinds of artifacts and the rule table of which kinds can connect.

A transport kind says how bytes travel, not what they mean (that is a contract's job).
"""
from __future__ import annotations

import enum


class AssetType(str, enum.Enum):
    """The Azure ML input/output types an mlpipe port can have."""

    URI_FILE = "uri_file"
    URI_FOLDER = "uri_folder"
    MLTABLE = "mltable"
    MLFLOW_MODEL = "mlflow_model"
    CUSTOM_MODEL = "custom_model"
    TRITON_MODEL = "triton_model"

    def __str__(self) -> str:
        return self.value


#: producer kind -> the consumer kinds it may feed. Documented in docs/checks.md (MP301).
#: An MLTable, an MLflow model and a custom model are all folders on disk, so a consumer
#: that only asks for a folder accepts them; nothing turns a folder into a file or a
#: plain folder into a table or a model.
CONNECTS: dict[AssetType, frozenset[AssetType]] = {
    AssetType.URI_FILE: frozenset({AssetType.URI_FILE}),
    AssetType.URI_FOLDER: frozenset({AssetType.URI_FOLDER}),
    AssetType.MLTABLE: frozenset({AssetType.MLTABLE, AssetType.URI_FOLDER}),
    AssetType.MLFLOW_MODEL: frozenset({AssetType.MLFLOW_MODEL, AssetType.CUSTOM_MODEL,
                                       AssetType.URI_FOLDER}),
    AssetType.CUSTOM_MODEL: frozenset({AssetType.CUSTOM_MODEL, AssetType.URI_FOLDER}),
    AssetType.TRITON_MODEL: frozenset({AssetType.TRITON_MODEL, AssetType.CUSTOM_MODEL,
                                       AssetType.URI_FOLDER}),
}


def can_connect(producer: AssetType, consumer: AssetType) -> bool:
    """Whether an output of kind ``producer`` may be bound to an input of kind ``consumer``."""
    return consumer in CONNECTS[producer]


def parse_asset_type(value: object) -> AssetType | None:
    """``AssetType`` for a kind given as enum or string (``"uri_folder"``), else None."""
    if isinstance(value, AssetType):
        return value
    if isinstance(value, str):
        try:
            return AssetType(value)
        except ValueError:
            return None
    return None
