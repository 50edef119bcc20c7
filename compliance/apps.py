from django.apps import AppConfig


class ComplianceConfig(AppConfig):
    name = "compliance"
    verbose_name = "Compliance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # logins and failed logins to the tenant admin: Django's auth signals are the only hook
        from compliance import receivers

        receivers.connect()
