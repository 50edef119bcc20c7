"""The API reference page's two files, made at build time (an MkDocs hook): the OpenAPI document as
the server generates it (``manage.py spectacular``, no database needed) and Redoc's standalone
bundle from the ``drf-spectacular-sidecar`` wheel, the same file the server serves at
``/api/v1/redoc``. Nothing is loaded from a CDN."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def openapi_document() -> bytes:
    """The OpenAPI 3.1 document of ``/api/v1/`` as JSON (what ``/api/v1/schema?format=json`` answers)."""
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "openapi.json"
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
        subprocess.run(
            [sys.executable, "manage.py", "spectacular", "--format", "openapi-json", "--file", str(target)],
            cwd=BASE_DIR,
            env=env,
            check=True,
            capture_output=True,
        )
        return target.read_bytes()


def redoc_bundle() -> Path:
    """Redoc's standalone JavaScript as the sidecar wheel ships it."""
    import drf_spectacular_sidecar

    return (
        Path(drf_spectacular_sidecar.__file__).parent
        / "static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
    )


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add ``reference/openapi.json`` and ``assets/redoc/redoc.standalone.js``."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=openapi_document()))
    files.append(File.generated(config, "assets/redoc/redoc.standalone.js", abs_src_path=str(redoc_bundle())))
    return files
