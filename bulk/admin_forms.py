"""The campaign creation form of the admin (``/admin/bulk/campaign/add/``, bulk/admin_views.py).

What the operator types becomes the body of ``POST /campaigns`` and is validated by the API's own
serializer (``bulk.serializers.CampaignCreateIn``), so the form refuses exactly what the API
refuses; the view then calls the API's services. Field names (a browser test drives them):

- ``sender_uid``, ``name``, ``text`` (the content: a text message), ``channel``, ``scheduled_at``
  (``datetime-local``, UTC; empty or past starts now, as in the API);
- ``audience_type``: ``followers`` | ``followers_filter`` (with ``followed_after``,
  ``followed_before``, ``exclude_uids``) | ``uids`` (one per line, or separated by commas or
  spaces; at most 10,000) | ``upload`` (``file``: any size, parsed like ``POST /audiences``);
- hidden: ``idempotency_key`` (made when the form is first shown: a double submit creates one
  campaign) and ``audience_id`` (the file a preview stored, used by Launch once the browser has
  dropped the file).

Errors: at most one per field, a sentence for the operator; what the API names by its JSON path
(``audience.uids``) is shown on the form field that holds it, the rest above the form.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django import forms
from django.http import QueryDict
from django.utils.html import format_html
from django.utils.safestring import SafeString
from rest_framework.exceptions import ValidationError

from api.errors import Forbidden, MissiveError, NotFound
from api.exceptions import flatten
from api.fields import MAX_ID
from bulk.models import AudienceType, Channel
from bulk.serializers import MAX_LIST, NAME_MAX, CampaignCreateIn
from storage.content import TEXT_MAX

KEY_PATTERN = re.compile(r"[!-~]{1,128}")  # printable ASCII, as the API's Idempotency-Key
SEPARATORS = re.compile(r"[\s,;]+")
API_ID_HINT = " (a JSON number or a string of digits)"  # api.fields.IdField's, for API clients
DATETIME = {"type": "datetime-local", "step": "1"}
FILTER = {"data-audience": AudienceType.FOLLOWERS_FILTER}  # create.js shows the row for this kind

# The API's JSON paths → the form field that holds them (the first prefix that matches).
FIELD_OF_PATH = (
    ("sender_uid", "sender_uid"),
    ("name", "name"),
    ("content", "text"),
    ("audience.uids", "uids"),
    ("audience.exclude_uids", "exclude_uids"),
    ("audience.followed_after", "followed_after"),
    ("audience.followed_before", "followed_before"),
    ("audience.audience_id", "file"),
    ("audience", "audience_type"),
    ("file", "file"),
    ("channel", "channel"),
    ("scheduled_at", "scheduled_at"),
)

# Form fields → the key of the API body they fill (dropped from the body once the form refused it).
API_KEY_OF = {
    "sender_uid": "sender_uid",
    "name": "name",
    "text": "content",
    "channel": "channel",
}

FIELDSETS: list[tuple[str | None, dict[str, Any]]] = [
    (None, {"fields": ("sender_uid", "name", "text")}),
    (
        "Audience",
        {
            "fields": (
                "audience_type",
                "followed_after",
                "followed_before",
                "exclude_uids",
                "uids",
                "file",
            )
        },
    ),
    ("Delivery", {"fields": ("channel", "scheduled_at")}),
]


def new_key() -> str:
    return uuid.uuid4().hex


def entries(text: str) -> list[str]:
    """A typed list of uids: one per line, or separated by commas, semicolons or spaces."""
    return [part for part in SEPARATORS.split(text) if part]


class MessagePreview(forms.Textarea):
    """The text box, with the message as a recipient will read it underneath (console's
    create.js keeps it current as the operator types; the server renders the same, escaped)."""

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        box = super().render(name, value, attrs, renderer)
        text = value or ""
        return format_html(
            '<div class="message-compose">{}'
            '<div class="message-preview-label">Preview: how recipients will read it</div>'
            '<div id="text-preview" class="message-preview" aria-live="polite">{}</div>'
            '<div id="text-count" class="message-count" data-max="{}">{} / {} characters</div>'
            "</div>",
            box,
            text,
            TEXT_MAX,
            f"{len(text):,}",
            f"{TEXT_MAX:,}",
        )


class CampaignCreateForm(forms.Form):
    use_required_attribute = False  # the server says what is missing, the same way every time
    required_css_class = "required"

    class Media:
        css = {"all": ("bulk/create.css",)}
        js = ("bulk/create.js",)

    sender_uid = forms.CharField(
        label="Sender uid",
        max_length=40,
        help_text="The business account that sends the campaign.",
    )
    name = forms.CharField(
        required=False,
        max_length=NAME_MAX,
        help_text="Optional: how operators tell this campaign apart (shown in the list).",
    )
    text = forms.CharField(
        label="Text",
        max_length=TEXT_MAX,
        strip=False,
        widget=MessagePreview(attrs={"rows": 5, "cols": 60}),
        help_text=f"The message every recipient gets (1 to {TEXT_MAX:,} characters).",
    )
    audience_type = forms.ChoiceField(
        label="Audience",
        choices=[
            (AudienceType.FOLLOWERS, "The sender's followers"),
            (AudienceType.FOLLOWERS_FILTER, "The sender's followers, filtered"),
            (AudienceType.UIDS, "A list of uids typed here"),
            (AudienceType.UPLOAD, "A file of uids (upload)"),
        ],
        initial=AudienceType.FOLLOWERS,
    )
    followed_after = forms.CharField(
        required=False,
        widget=forms.DateTimeInput(attrs=DATETIME | FILTER),
        help_text="Only followers who followed after this time (UTC).",
    )
    followed_before = forms.CharField(
        required=False,
        widget=forms.DateTimeInput(attrs=DATETIME | FILTER),
        help_text="Only followers who followed before this time (UTC).",
    )
    exclude_uids = forms.CharField(
        label="Exclude uids",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60} | FILTER),
        help_text="Followers who must not get it: uids separated by commas, spaces or lines.",
    )
    uids = forms.CharField(
        label="Uids",
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 30, "data-audience": AudienceType.UIDS}),
        help_text=(
            f"One uid per line (or separated by commas), at most {MAX_LIST:,}; lines that are "
            "not uids are skipped and counted. For more, upload a file."
        ),
    )
    file = forms.FileField(
        label="File of uids",
        required=False,
        widget=forms.ClearableFileInput(attrs={"data-audience": AudienceType.UPLOAD}),
        help_text="A text or CSV file, one uid per line, any size.",
    )
    audience_id = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )
    channel = forms.ChoiceField(
        choices=Channel.choices,
        initial=Channel.DAILY,
        help_text="daily: within the sender's daily budget; priority: senders allowed only.",
    )
    scheduled_at = forms.CharField(
        label="Start at",
        required=False,
        widget=forms.DateTimeInput(attrs=DATETIME),
        help_text="Optional, UTC. Empty (or a time already past) starts the campaign now.",
    )
    idempotency_key = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    def clean_sender_uid(self) -> str:
        value = str(self.cleaned_data["sender_uid"]).strip()
        if not (value.isascii() and value.isdigit()):
            raise forms.ValidationError("Enter the sender's uid: digits only.")
        if not 0 < int(value) <= MAX_ID:
            raise forms.ValidationError("Enter a uid between 1 and 2^63-1.")
        return value

    # -- the API's validation ----------------------------------------------------------------
    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        body = self._body(data)
        serializer = CampaignCreateIn(data=body)
        try:
            valid = serializer.is_valid()
        except MissiveError as exc:  # content and list-size checks raise the API's own errors
            self.add_api_error(exc)
            return data
        if not valid:
            for path, problem in flatten(serializer.errors).items():
                self._add(path, problem)
            return data
        data["api"] = dict(serializer.validated_data)
        return data

    def _body(self, data: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "sender_uid": data.get("sender_uid", "").strip(),
            "name": data.get("name", ""),
            "content": {"type": "text", "text": data.get("text", "")},
            "channel": data.get("channel") or Channel.DAILY,
            "scheduled_at": data.get("scheduled_at") or None,
            "audience": self._audience(data),
        }
        for name, key in API_KEY_OF.items():
            if name in self.errors:  # already said why: the serializer must not say it again
                body.pop(key)
        return body

    def _audience(self, data: dict[str, Any]) -> dict[str, Any]:
        kind = data.get("audience_type") or AudienceType.FOLLOWERS
        if kind == AudienceType.FOLLOWERS_FILTER:
            spec: dict[str, Any] = {"type": kind}
            for name in ("followed_after", "followed_before"):
                if data.get(name):
                    spec[name] = data[name]
            if data.get("exclude_uids"):
                spec["exclude_uids"] = entries(data["exclude_uids"])
            return spec
        if kind == AudienceType.UIDS:
            found = entries(data.get("uids", ""))
            if not found:
                self.add_error("uids", "Enter at least one uid, one per line.")
            elif len(found) > MAX_LIST:
                self.add_error(
                    "uids",
                    f"{len(found):,} uids: at most {MAX_LIST:,} can be typed here; upload them "
                    "as a file instead.",
                )
            else:
                return {"type": kind, "uids": found}
            return {"type": AudienceType.FOLLOWERS}
        if kind == AudienceType.UPLOAD:
            return self._upload(data)
        return {"type": AudienceType.FOLLOWERS}

    def _upload(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("file") is not None:
            # Stored by the view once the rest is valid: a bad field must not cost a stored list.
            return {"type": AudienceType.FOLLOWERS}
        if data.get("audience_id"):
            return {"type": AudienceType.UPLOAD, "audience_id": data["audience_id"]}
        if "file" not in self.errors:
            self.add_error("file", "Choose a file of uids, one per line.")
        return {"type": AudienceType.FOLLOWERS}

    # -- errors --------------------------------------------------------------------------------
    def add_api_error(self, exc: MissiveError) -> None:
        """A service's or the serializer's refusal, on the field it concerns."""
        if exc.fields:
            paths = list(exc.fields)
            self._add(paths[0], exc.detail if len(paths) == 1 else str(exc.fields[paths[0]]))
        elif isinstance(exc, NotFound):  # the only field-less NotFound: an unknown sender
            self._add("sender_uid", exc.detail)
        elif isinstance(exc, Forbidden):  # the only field-less Forbidden: the priority channel
            self._add("channel", exc.detail)
        else:
            self._add("", exc.detail)

    def add_validation_error(self, exc: ValidationError) -> None:
        for path, problem in flatten(exc.detail).items():
            self._add(path, problem)

    def _add(self, path: str, problem: str) -> None:
        field = next((f for p, f in FIELD_OF_PATH if path == p or path.startswith(f"{p}.")), None)
        if field is not None and field in self.errors:
            return  # one error per field
        self.add_error(field, sentence(self, field, path, problem))

    # -- what the view needs --------------------------------------------------------------------
    def launch_key(self) -> str:
        """The form's idempotency key (a new one if it was lost or tampered with)."""
        typed = (self.cleaned_data.get("idempotency_key") or "").strip()
        return typed if KEY_PATTERN.fullmatch(typed) else new_key()

    def keep_audience(self, audience_id: int) -> None:
        """Re-render with the stored file's id (a browser never sends a file twice)."""
        data = QueryDict(mutable=True)
        data.update(self.data)
        data["audience_id"] = str(audience_id)
        self.data = data


def sentence(form: forms.Form, field: str | None, path: str, problem: str) -> str:
    """``must be ...`` → ``Sender uid must be ...``; ``content.text must ...`` → ``Text must
    ...``; an entry of a list names its place."""
    text = str(problem).replace(API_ID_HINT, "")  # an operator types digits, not JSON
    label = str(form[field].label) if field else path
    if path and text.startswith(f"{path} "):
        return f"{label}{text[len(path) :]}"
    if not text[:1].islower():
        return text
    tail = path.rpartition(".")[2]
    if tail.isdigit():
        return f"{label}: entry {int(tail) + 1} {text}"
    return f"{label} {text}"
