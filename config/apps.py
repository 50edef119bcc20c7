"""The admin app as the project installs it (``INSTALLED_APPS``): Django's, with the project's
default site, ``core.admin.AdminSite``."""

from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    """``django.contrib.admin`` (autodiscovery of every app's ``admin`` module included) whose
    ``admin.site`` is ``core.admin.AdminSite``: one admin per model, whatever the apps' order."""

    default_site = "core.admin.AdminSite"
