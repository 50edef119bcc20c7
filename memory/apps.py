from django.apps import AppConfig
from django.core import checks


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from core.checks import admin_actions_need_permissions

        checks.register(admin_actions_need_permissions, checks.Tags.admin)

        from core.db.pooler import check_session_pooling

        # probes the server (manage.py check --database default, migrate): a transaction pooler is refused
        checks.register(check_session_pooling, checks.Tags.database)

        from core.recording import recorder_register
        from memory.episodic.services import trail_record

        # the apps below the trail (agents, tenants) record their changes through core.recording
        recorder_register(trail_record)

        from core.metrics import scrape_collector_register
        from memory.consolidation.metrics import ConsolidationCollector

        scrape_collector_register(ConsolidationCollector())
