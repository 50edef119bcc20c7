"""The groups "operator" and "compliance officer" in each tenant schema, with their permissions.

Operators work the contradiction review queue (``resolve_contradiction``) and may edit predicates;
compliance officers may look at the same pages but not act.

Django creates permissions in ``post_migrate``, after every migration of a schema has run, and
django-tenants migrates each tenant schema on its own: in a new schema the permissions do not exist
yet when this runs. So it first creates the content types and permissions of the apps it needs
(``create_permissions`` is idempotent; the ``post_migrate`` pass then finds them), then the groups.
In the public schema the router skips this migration (``memory`` is a tenant app).
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = [
    "memory.view_contradiction",
    "memory.view_fact",
    "memory.view_factprovenance",
    "memory.view_entity",
    "memory.view_predicate",
    "memory.view_event",
    "agents.view_agent",
]
GROUPS = {
    "operator": [
        *VIEW,
        "memory.resolve_contradiction",
        "memory.change_predicate",
        "memory.change_cardinality",
    ],
    "compliance officer": VIEW,
}


def groups_create(apps, schema_editor):
    alias = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    # content type ids differ from schema to schema: never reuse another schema's cached ones
    ContentType.objects.clear_cache()
    for label in ("memory", "agents"):
        create_permissions(global_apps.get_app_config(label), verbosity=0, using=alias, apps=apps)
    for name, perms in GROUPS.items():
        group, _ = Group.objects.using(alias).get_or_create(name=name)
        for perm in perms:
            app_label, codename = perm.split(".")
            group.permissions.add(
                Permission.objects.using(alias).get(content_type__app_label=app_label, codename=codename)
            )


def groups_delete(apps, schema_editor):
    apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(
        name__in=list(GROUPS)
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("agents", "0002_agent_name_charset"),
        ("memory", "0004_entity_predicate_fact_contradiction_factprovenance_and_more"),
    ]

    operations = [migrations.RunPython(groups_create, groups_delete)]
