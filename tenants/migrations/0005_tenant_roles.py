# Issue 12: a PostgreSQL role per tenant. Tenants created from now on get theirs with their schema
# (Tenant.create_schema); this gives one to each tenant that exists already.

from django.db import migrations
from django_tenants.utils import schema_exists

from core.tenancy import roles_enabled
from tenants.roles import tenant_role_drop, tenant_role_ensure


def _schemas(apps):  # type: ignore[no-untyped-def]
    tenant_model = apps.get_model("tenants", "Tenant")
    names = tenant_model.objects.exclude(schema_name="public").values_list("schema_name", flat=True)
    return [name for name in names if schema_exists(name)]


def roles_create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if roles_enabled():
        for schema_name in _schemas(apps):
            tenant_role_ensure(schema_name)


def roles_drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if roles_enabled():
        for schema_name in _schemas(apps):
            tenant_role_drop(schema_name)


class Migration(migrations.Migration):
    dependencies = [("tenants", "0004_tenant_json_max_depth")]

    operations = [migrations.RunPython(roles_create, roles_drop)]
