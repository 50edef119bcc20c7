"""The "compliance officer" group sees every layer read-only: semantic memories (forgotten ones
too), checkpoints, agents and API keys (issue and revoke history), the admin log of people's
actions, the admin users and groups, and compliance's own records; it may run a verification of
the trail and export it (both are recorded, and change nothing of the memory). It gets no add,
change or delete permission on anything.

Same approach as memory 0005: in a new tenant schema the permissions do not exist yet when this
runs (Django creates them in ``post_migrate``), so it creates the content types and permissions of
the apps it needs first (idempotent). The router skips it in the public schema (a tenant app).
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

OFFICER = "compliance officer"
APPS = ("memory", "agents", "admin", "auth", "compliance")
EXTRA = [("compliance", "run_chaincheck"), ("compliance", "export_trail")]


def widen(apps, schema_editor):
    alias = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType.objects.clear_cache()  # content type ids differ from schema to schema
    for label in APPS:
        create_permissions(global_apps.get_app_config(label), verbosity=0, using=alias, apps=apps)
    group, _ = Group.objects.using(alias).get_or_create(name=OFFICER)
    views = Permission.objects.using(alias).filter(
        content_type__app_label__in=APPS, codename__startswith="view_"
    )
    group.permissions.add(*views)
    for app_label, codename in EXTRA:
        group.permissions.add(
            Permission.objects.using(alias).get(content_type__app_label=app_label, codename=codename)
        )


def narrow(apps, schema_editor):
    alias = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.using(alias).filter(name=OFFICER).first()
    if group is None:
        return
    kept = {
        "view_contradiction",
        "view_fact",
        "view_factprovenance",
        "view_entity",
        "view_predicate",
        "view_event",
        "view_agent",
    }
    for perm in Permission.objects.using(alias).filter(group=group):
        if perm.codename not in kept:
            group.permissions.remove(perm)


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0001_initial"),
        # every layer's models exist in the state, procedural's too (0010-0012), so the group sees them
        ("memory", "0012_memory_hierarchical_scope"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(widen, narrow)]
