"""The console: server-rendered pages for a workspace's people (and operators) under
/console, on the API's own workflows and store reads (docs/console.md). Pages are Jinja2
templates in front/templates/console/, charts SVG drawn here; no JavaScript."""

from quart import Blueprint

bp = Blueprint("console", __name__, url_prefix="/console", template_folder="../templates")

# the views register on `bp`, made above
from . import campaigns, deliverability, guard, messages, operator, sign_in, suppressions, webhooks  # noqa: E402,F401, I001

guard.install(bp)
