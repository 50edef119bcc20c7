"""Engram's database backend (``DATABASES["default"]["ENGINE"] = "core.db"``): see ``core.db.base``."""
