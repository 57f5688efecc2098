"""What vulture (``make lint``, configured in pyproject.toml) cannot see is used: names read
by a framework, by reflection or by a user, never by a name in our own code. Each with why.

Vulture reads this file with the code; ``_.name`` marks an attribute or method name as used.
Nothing here runs. A name used only by tests does not belong here: such code is dead.
"""
# --- protocols Python itself calls -------------------------------------------------------
_.__class_getitem__  # annotations: Input[...]/Output[...]/Param[...] subscript a class
_.__getattr__  # mlpipe/__init__, evidence/__init__: PEP 562 lazy module attributes
_.__dir__  # mlpipe/__init__: PEP 562, dir() of the lazy package
_.__wrapped__  # runtime/loaders: functools' and inspect's unwrap read it
_.__doc__  # component_yaml: help() and the docs read the component's docstring

# --- read by a library, by name ----------------------------------------------------------
_.isolation_level  # evidence/store: sqlite3's connection attribute (we issue BEGIN)
_.type_annotation_map  # evidence/models: SQLAlchemy's DeclarativeBase reads it
_.component_version_id  # evidence/models, reader: a mapped column / the row's field
_.environment_id  # evidence/models, reader: a mapped column / the row's field
_.signed_at  # evidence/models: a mapped column (written by Alembic's schema, read by SQL)
_.recorded_at  # evidence/models: a mapped column
down_revision  # evidence/storage/migrations/versions/*: Alembic reads the revision chain by name
branch_labels  # evidence/storage/migrations/versions/*: Alembic's revision header
depends_on  # evidence/storage/migrations/versions/*: Alembic's revision header
downgrade  # evidence/storage/migrations/versions/*: Alembic calls upgrade()/downgrade() by name
_.deterministic_signing  # evidence/keys: cryptography's ECDSA signature algorithm reads it
_.predict  # components/serving: MLflow's PythonModel interface
_.list_commands  # cli/base: click's Group calls it for --help and to resolve a command
_.get_command  # cli/base: click's Group calls it to find a command (imported on first use)
_load_pyfunc  # components/serving: MLflow's loader_module entry point

# --- reflection ----------------------------------------------------------------------------
# backends/azure/lookups: Lookups.get calls getattr(self, f"_{kind}") for each kind it asks.
_._workspace
_._environment
_._component
_._data
_._sizes
_._usages
_._model  # a model input's registered model (issue 35)
# scripts/gen_tutorial: the tutorial's template is filled from **locals().
second
show
tampered
aml_check
aml_submit
aml_keys
aml_evidence
aml_review
aml_promote
aml_trace
defect_classifier_aml  # pipelines/: the tutorial's azure-ai-ml pipeline, named on the command line

# --- the library's public API (docs/), used by users' code, not by mlpipe's own --------------
_.with_contracts  # docs/azure.md: ScriptComponent.with_contracts(port=Contract)
validate_export_fully  # docs/azure.md: the long way to validate an export
define_vm_size  # docs/distributed.md, docs/checks.md (MP516's fix)
define_cluster  # docs/distributed.md, docs/checks.md (MP516's fix)
_.memory_gib  # compute.VmSize: a field a user fills in for define_vm_size
_.explicit_name  # spec.StepSpec: whether the pipeline named the step (tests/test_dsl.py)
