"""Subscription forms: CRUD under /api/v1/forms (permission area `forms`). The public side
(hosted page, submission endpoint, confirmation link) is front/routes/form_pages.py.

Every form view carries `hosted_url` (the page to link to) and `embed`: the action URL,
the form's signed token and an HTML snippet any website can paste to post to us."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints
from quart import Blueprint, render_template

from mongo import forms as form_store
from mongo import lists as list_store
from pipelines import views
from pipelines.audience import forms
from pipelines.audience.segment_rules import ATTRIBUTE_NAME
from pipelines.core.errors import NotFound, PostroomError, ValidationFailed
from pipelines.messages import links
from pipelines.templates import merge_tags
from pipelines.workflows import accept_email, form_signup, manage_forms

from ..lookup import owned, updated
from ..pagination import PageQuery
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one
from ..runtime import caller, db, settings
from ..types import REDIRECT_URL_PATTERN, DisplayName, Id, Strict
from ..validation import body

bp = Blueprint("forms", __name__, url_prefix="/api/v1", template_folder="../templates")

MAX_URL_CHARS = 2048
MAX_ORIGINS = 20


def _field_name(value: str) -> str:
    if value in forms.RESERVED_NAMES:
        raise ValueError(f"{value} is taken: the email address is always asked, and token and website "
                         "are used by the form itself")
    if value not in forms.STANDARD_FIELDS and not ATTRIBUTE_NAME.match(value):
        raise ValueError("first_name, last_name, or a custom attribute name (1-64 letters, digits, _ or -)")
    return value


def _redirect_url(value: str) -> str:
    problem = forms.redirect_problem(value)
    if problem:
        raise ValueError(f"the URL {problem}")
    return value


def _origin(value: str) -> str:
    parts = urlsplit(value.rstrip("/"))
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.path or parts.query \
            or parts.fragment or parts.username or parts.password:
        raise ValueError("must be an origin: scheme://host[:port], nothing after it")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


FieldName = Annotated[str, StringConstraints(min_length=1, max_length=64), AfterValidator(_field_name),
                      Field(json_schema_extra={"pattern": r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$",
                                               "not": {"enum": list(forms.RESERVED_NAMES)}})]
RedirectUrl = Annotated[str, StringConstraints(max_length=MAX_URL_CHARS), AfterValidator(_redirect_url),
                        Field(json_schema_extra={"pattern": REDIRECT_URL_PATTERN}, description=(
                           "An absolute http(s) URL without credentials, white space, control characters, "
                           "backslashes, quotes, <, >, ; or , (percent-encode those)."))]
Origin = Annotated[str, StringConstraints(max_length=300), AfterValidator(_origin), Field(json_schema_extra={
    "pattern": r"^[hH][tT][tT][pP][sS]?://(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}(?::[0-9]{1,5})?/?$"})]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(max_length=2000)]


class FormField(Strict):
    name: FieldName = Field(description="first_name, last_name, or a custom attribute the answer is stored in.")
    type: Literal[forms.FIELD_TYPES] = Field("text", description=(
        "text (at most 500 characters; first_name and last_name are text, at most 100), number, "
        "boolean (a checkbox) or date (YYYY-MM-DD)."))
    label: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = Field(
        None, description="What the page shows; default: First name, Last name, or the attribute name.")
    required: bool = Field(False, description="The email address is always required; a required boolean "
                                              "must be ticked.")


class FormContent(Strict):
    list_ids: Annotated[list[Id], Field(max_length=forms.MAX_LISTS)] = Field(
        None, description="Static lists of this workspace the address joins (0 to 20).")
    fields: Annotated[list[FormField], Field(max_length=forms.MAX_FIELDS)] = Field(
        None, description="What the form asks besides the email address (0 to 20, names unique).")
    double_opt_in: bool = Field(None, description=(
        "true (default): the address joins the lists only once it confirms through the link of a "
        "confirmation email; false: at once."))
    title: Name | None = Field(None, description="The page's heading; default: the form's name.")
    description: Text | None = Field(None, description="A paragraph under the heading.")
    submit_label: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = Field(
        None, description=f"The button; default \"{forms.DEFAULT_TEXTS['submit_label']}\".")
    thank_you_text: Text | None = Field(None, description="Shown once subscribed (single opt-in: after the "
                                                          "submission; double opt-in: after confirming).")
    confirmation_text: Text | None = Field(None, description="Double opt-in: shown after the submission "
                                                             "(check your inbox).")
    confirmation_email_subject: Annotated[str, StringConstraints(min_length=1, max_length=998)] | None = Field(
        None, description="Subject of the confirmation email (merge tags allowed, e.g. {{company_name}}).")
    confirmation_email_text: Text | None = Field(None, description="The confirmation email's message, above "
                                                                   "its link (merge tags allowed).")
    from_name: DisplayName | None = Field(None, description="Display name of the confirmation email's sender "
                                                            "(the workspace's default sender address).")
    redirect_url: RedirectUrl | None = Field(None, description=(
        "After a successful browser submission, go here (303) instead of our page."))
    confirmed_redirect_url: RedirectUrl | None = Field(None, description=(
        "After confirming, go here (303) instead of our thank-you page."))
    allowed_origins: Annotated[list[Origin], Field(max_length=MAX_ORIGINS)] = Field(None, description=(
        "Websites (scheme://host[:port]) whose scripts may post JSON to the submission endpoint "
        "(CORS). Plain HTML form posts work from any site without it."))


class CreateForm(FormContent):
    name: Name = Field(description="Required, 1–200 characters; for you (and the default title).")


class UpdateForm(FormContent):
    name: Name = Field(None, description="1–200 characters.")


async def _checked(data: FormContent, current: dict | None = None) -> dict:
    """The stored fields a create or PATCH sets, checked against the workspace: lists
    exist and are static, field names are unique, the texts' merge tags are well-formed,
    and a double opt-in form has a sender for its confirmation email."""
    changes = data.model_dump(include=data.model_fields_set)
    for name in ("name", "list_ids", "fields", "double_opt_in", "allowed_origins"):
        if name in changes and changes[name] is None:
            raise ValidationFailed(f"{name}: may not be null.", path=name)
    if current is None:
        changes = {"list_ids": [], "fields": [], "double_opt_in": True, "allowed_origins": [], **changes}
    if "list_ids" in changes:
        changes["list_ids"] = list(dict.fromkeys(changes["list_ids"]))
        found = {d["_id"]: d for d in await list_store.get_many(db(), caller().workspace_id, changes["list_ids"])}
        for i, list_id in enumerate(changes["list_ids"]):
            if list_id not in found:
                raise NotFound("No such list in this workspace.", path=f"list_ids[{i}]")
            if found[list_id]["type"] != "static":
                raise ValidationFailed(f"list_ids[{i}]: a form fills static lists; dynamic lists follow "
                                       "their conditions.", path=f"list_ids[{i}]")
    if "fields" in changes:
        seen = set()
        for i, field in enumerate(changes["fields"]):
            if field["name"] in seen:
                raise ValidationFailed(f"fields[{i}].name: asked twice.", path=f"fields[{i}].name")
            if field["name"] in forms.STANDARD_FIELDS and field["type"] != "text":
                raise ValidationFailed(f"fields[{i}].type: {field['name']} is text.", path=f"fields[{i}].type")
            seen.add(field["name"])
    for name in ("confirmation_email_subject", "confirmation_email_text"):
        if changes.get(name):
            try:
                merge_tags.parse(changes[name])
            except merge_tags.MergeTagError as error:
                raise error.at(name) from None
    if changes.get("double_opt_in"):  # turned on (or created on): checked then, not on every PATCH
        try:
            await accept_email.sender_of(db(), settings(), caller().workspace, {})
        except PostroomError as error:
            error.message = ("double_opt_in: the confirmation email needs a sender: " + error.message)
            error.path = "double_opt_in"
            raise
    return changes


async def form_view(doc: dict) -> dict:
    shown = forms.effective(doc)
    action = links.form_url(settings().base_url, doc["_id"])
    token = form_signup.form_token(settings(), doc)
    snippet = await render_template("form_embed.html", form=shown, action=action, token=token,
                                    honeypot=forms.HONEYPOT_FIELD, values={}, errors={})
    return views.form(doc, action=action, token=token, embed_html=snippet)


list_route(bp, "/forms", "list_forms", PageQuery, form_store.page, view=form_view)


@bp.post("/forms")
@body(CreateForm)
async def create_form(data: CreateForm):
    doc = await manage_forms.create(db(), caller().workspace_id, await _checked(data))
    return one(await form_view(doc), 201)


read_route(bp, "/forms/<form_id>", "get_form", form_store, "form", form_view)


@bp.patch("/forms/<form_id>")
@body(UpdateForm)
async def update_form(form_id: str, data: UpdateForm):
    current = await owned(form_store, form_id, "form")
    changes = await _checked(data, current)
    doc = await updated(manage_forms.update, form_id, "form", changes, current)
    return one(await form_view(doc))


delete_route(bp, "/forms/<form_id>", "delete_form", manage_forms.delete, "form")
