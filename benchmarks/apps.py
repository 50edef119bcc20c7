from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """Benchmarks and the LoCoMo evaluation; an app only so its management commands are found
    (``locomo_ingest``, ``locomo_eval``). It has no models."""

    name = "benchmarks"
    verbose_name = "Benchmarks and evaluation"
