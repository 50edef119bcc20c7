from django.apps import AppConfig


class ComplianceConfig(AppConfig):
    name = "compliance"
    verbose_name = "Compliance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # logins and failed logins to the tenant admin: Django's auth signals are the only hook
        from compliance import lifecycle, receivers
        from core.holds import holds_answer

        receivers.connect()
        # every hard delete of a layer, and a tenant's delete, asks what a legal hold keeps (core.holds)
        holds_answer(lifecycle.unheld, lifecycle.tenant_holds)

        from compliance.metrics import OperationsCollector
        from core.metrics import CeleryQueueCollector, scrape_collector_register

        scrape_collector_register(OperationsCollector())
        scrape_collector_register(CeleryQueueCollector())
