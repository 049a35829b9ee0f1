"""Rendering a dashboard page: the Jinja environment, asset versions, and what every page gets.

Apart from the pages themselves so the sign-in pages and the error pages of
every route module render the same way without importing one another.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from agent_team.dashboard.auth import login_path
from agent_team.dashboard.context import STATIC_DIR, DashboardContext

__all__ = ["TEMPLATES_DIR", "error_page", "render_page"]

TEMPLATES_DIR = Path(__file__).parent / "templates"


def _asset_versions() -> dict[str, str]:
    """A short content hash per static file, so browsers never run yesterday's JS."""
    versions: dict[str, str] = {}
    for path in STATIC_DIR.glob("*"):
        if path.is_file():
            versions[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return versions


def _environment() -> jinja2.Environment:
    # Autoescape everything (not only *.html): every template here renders HTML.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_ENV = _environment()
_VERSIONS = _asset_versions()


def render_page(
    request: Request, template: str, context: dict[str, Any], *, status_code: int = 200
) -> HTMLResponse:
    """Render a template with what every page needs: the path prefix and asset links.

    `base` is the ASGI root path, so links keep working behind a reverse proxy
    that mounts the dashboard under a prefix.
    """
    base = str(request.scope.get("root_path", "")).rstrip("/")

    def static(name: str) -> str:
        version = _VERSIONS.get(name)
        return f"{base}/static/{name}" + (f"?v={version}" if version else "")

    ctx = getattr(request.app.state, "ctx", None) if "app" in request.scope else None
    viewer = ctx.auth.viewer(request) if isinstance(ctx, DashboardContext) else None
    sign_in_on = isinstance(ctx, DashboardContext) and ctx.auth.sign_in_on
    here = request.url.path[len(base) :] if request.url.path.startswith(base) else "/"
    html = _ENV.get_template(template).render(
        {
            "base": base,
            "static": static,
            "live": False,
            "viewer": viewer,
            "sign_in_on": sign_in_on,
            # Never back to a sign-in page itself (GitHub's callback is spent once).
            "login_href": login_path(
                base, "/" if here == "/login" or here.startswith("/login/") else here
            ),
            **context,
        }
    )
    # The pages are live views of changing state: never serve one from a cache.
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    return HTMLResponse(html, status_code=status_code, headers=headers)


def error_page(request: Request, status_code: int, heading: str, message: str) -> HTMLResponse:
    return render_page(
        request,
        "error.html",
        {"status_code": status_code, "heading": heading, "message": message},
        status_code=status_code,
    )
