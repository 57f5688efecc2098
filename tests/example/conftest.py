from mlflow_server import mlflow_server  # noqa: F401  (a real tracking server, per session)
