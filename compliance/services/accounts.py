"""The users and groups of the tenant's admin: saved and deleted by the service that records it."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import Group, User
from django.db import transaction

from memory.episodic.models import Event

from .records import person_record


def account_change_record(
    *, username: str, model: str, object_label: str, object_id: object, action: str, changed: Sequence[str]
) -> Event:
    """Record that ``username`` added, changed or deleted (``action``: ``create``, ``update``,
    ``delete``) a user or group of the admin; ``changed`` names fields (a password is named, never
    shown)."""
    fields = sorted(set(changed))
    verb = {"create": "created", "update": "changed", "delete": "deleted"}[action]
    return person_record(
        username=username,
        action=f"{model}_{action}",
        content=f"{username} {verb} {model} {object_label}" + (f" ({', '.join(fields)})." if fields else "."),
        payload={"object": object_label, "object_id": str(object_id), "fields": fields},
    )


def user_save(*, user: User, username: str, created: bool, changed: Sequence[str]) -> User:
    """Save an admin user (the admin's form has set its fields and password hash) and record it."""
    with transaction.atomic():
        user.save()
        account_change_record(
            username=username,
            model="user",
            object_label=user.get_username(),
            object_id=user.pk,
            action="create" if created else "update",
            changed=changed,
        )
    return user


def group_save(*, group: Group, username: str, created: bool, changed: Sequence[str]) -> Group:
    """Save an admin group and record it."""
    with transaction.atomic():
        group.save()
        account_change_record(
            username=username,
            model="group",
            object_label=group.name,
            object_id=group.pk,
            action="create" if created else "update",
            changed=changed,
        )
    return group


def account_delete(*, obj: User | Group, username: str) -> None:
    """Delete an admin user or group and record it."""
    with transaction.atomic():
        label = obj.get_username() if isinstance(obj, User) else obj.name
        model = "user" if isinstance(obj, User) else "group"
        object_id = obj.pk
        obj.delete()
        account_change_record(
            username=username,
            model=model,
            object_label=label,
            object_id=object_id,
            action="delete",
            changed=[],
        )
