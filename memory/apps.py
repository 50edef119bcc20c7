from django.apps import AppConfig
from django.core import checks


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from core.checks import admin_actions_need_permissions

        checks.register(admin_actions_need_permissions, checks.Tags.admin)

        from core.recording import recorder_register
        from memory.episodic.services import trail_record

        # the apps below the trail (agents, tenants) record their changes through core.recording
        recorder_register(trail_record)

        from prometheus_client import REGISTRY

        from memory.consolidation.metrics import ConsolidationCollector

        if not any(isinstance(c, ConsolidationCollector) for c in list(REGISTRY._collector_to_names)):
            REGISTRY.register(ConsolidationCollector())
