"""``manage.py migrate`` is ``migrate_schemas`` (as with django-tenants), as the maintenance role."""

from tenants.management.commands.migrate_schemas import Command

__all__ = ["Command"]
