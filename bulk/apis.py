"""Campaign HTTP API (API.md, "Campaigns (bToC bulk)"): thin views over bulk services/selectors.
Each view validates its input, calls one service or selector and renders the output serializer.

Every view needs the ``campaigns`` scope. A client acts as its own senders only and sees only
their campaigns and its own uploaded audiences; anything else answers 404, like ids that do not
exist. ``POST /audiences`` streams its body: a multipart ``file`` goes through Django's upload
handlers (memory, then a temporary file: DATA_UPLOAD_MAX_MEMORY_SIZE only bounds form fields) and
a raw body (``text/plain``, ``text/csv`` or ``application/octet-stream``) is read in chunks;
neither is ever read whole; a multipart body that cannot be parsed answers 400 ``malformed``. Its
size limit is ``settings.BULK_UPLOAD_MAX_BYTES`` (1 GiB by default; 413 beyond).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from api.auth import principal, require_sender
from api.errors import InvalidInput
from api.fields import path_ids
from api.models import ApiClient, Scope
from api.views import ERROR_SCHEMA, ERRORS, ApiView, check_body_size, idempotency_key, validated
from bulk import selectors, services
from bulk.models import Campaign
from bulk.serializers import (
    AudienceOut,
    AudienceUploadIn,
    CampaignCreateIn,
    CampaignListQuery,
    CampaignOut,
    CampaignPageOut,
    DryRunOut,
    upload_lines,
)

UPLOAD_MAX_BYTES = 1 << 30
CHUNK_BYTES = 64 * 1024
CAMPAIGN_BODY_MAX = 1024 * 1024  # two lists of 10,000 ids as strings, and the content
NAME_MAX = 200
NON_EMPTY = {"type": "string", "minLength": 1}  # an empty upload answers 400
UPLOAD_HELP = (
    "multipart `file` field, or the uids as a raw body (text/plain, text/csv or "
    "application/octet-stream)"
)


def upload_max_bytes() -> int:
    return int(getattr(settings, "BULK_UPLOAD_MAX_BYTES", UPLOAD_MAX_BYTES))


def client_of(request: Request) -> ApiClient:
    return selectors.api_client(principal(request).client_id)


# -- audiences -------------------------------------------------------------------------------
class RawBody:
    """A text/plain request body, left unread until the view streams it."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def chunks(self) -> Iterator[bytes]:
        return iter(lambda: bytes(self.stream.read(CHUNK_BYTES)), b"")


class UidLinesParser(BaseParser):
    media_type = "text/plain"

    def parse(  # type: ignore[override]  # the body stays a stream, not a mapping
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> RawBody:
        return RawBody(stream)


class CsvUidLinesParser(UidLinesParser):
    media_type = "text/csv"


class BinaryUidLinesParser(UidLinesParser):
    media_type = "application/octet-stream"


class MalformedUpload(InvalidInput):
    code = "malformed"


def upload_chunks(request: Request) -> Iterator[bytes]:
    try:
        data = request.data
    except ParseError as exc:  # a broken multipart body: not the JSON the generic code names
        raise MalformedUpload(f"Malformed upload: {exc.detail}", {"file": "unreadable"}) from exc
    if isinstance(data, RawBody):
        return data.chunks()
    upload = data.get("file") if hasattr(data, "get") else None
    if not isinstance(upload, UploadedFile):
        raise InvalidInput(f"Send the uids as a {UPLOAD_HELP}.", {"file": "missing or empty"})
    if not upload.size:
        raise InvalidInput("The upload is empty.", {"file": "empty"})
    return upload.chunks(CHUNK_BYTES)


class AudienceUploadApi(ApiView):
    """Store a list of uids (one per line) for campaigns with an ``upload`` audience."""

    required_scope = Scope.CAMPAIGNS
    parser_classes: ClassVar[list[type[BaseParser]]] = [  # type: ignore[misc]
        MultiPartParser,
        UidLinesParser,
        CsvUidLinesParser,
        BinaryUidLinesParser,
    ]
    max_body_bytes = 1 << 62  # post() applies BULK_UPLOAD_MAX_BYTES, read when it runs

    @extend_schema(
        operation_id="audience_upload",
        tags=["Audiences"],
        summary="Upload an audience file",
        description=f"Upload uids, one per line: {UPLOAD_HELP}. Business rule the schema cannot "
        "express: an upload without one valid uid answers 400.",
        parameters=[
            OpenApiParameter("name", str, description="a label for operators (optional)"),
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="a retried upload with the same key, name and lines returns the "
                "same audience (200), stored once; the same key with other lines answers 409",
            ),
        ],
        request={
            "multipart/form-data": AudienceUploadIn,
            "text/plain": NON_EMPTY,
            "text/csv": NON_EMPTY,
            "application/octet-stream": OpenApiTypes.BINARY,
        },
        responses={
            201: AudienceOut,
            200: OpenApiResponse(AudienceOut, "an Idempotency-Key replay: the original"),
            409: OpenApiResponse(ERROR_SCHEMA, "Idempotency-Key reused for another upload"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        check_body_size(request, upload_max_bytes())
        if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
            raise InvalidInput("The upload is empty.", {"file": "empty"})
        lines = upload_lines(upload_chunks(request))
        name = str(request.query_params.get("name", ""))[:NAME_MAX]
        client, key = client_of(request), idempotency_key(request)
        if key is None:
            audience = services.audience_upload(lines=lines, client=client, name=name)
            return Response(AudienceOut(audience).data, status=201)
        audience, created = services.audience_upload_once(
            lines=lines, client=client, key=key, name=name
        )
        return Response(AudienceOut(audience).data, status=201 if created else 200)


# -- campaigns -------------------------------------------------------------------------------
REPLAY_OR_PREVIEW = PolymorphicProxySerializer(
    component_name="CampaignOrDryRun",
    serializers=[CampaignOut, DryRunOut],
    resource_type_field_name=None,
)


def campaign_body(campaign: Campaign) -> dict[str, Any]:
    return dict(CampaignOut(selectors.campaign_progress(campaign)).data)


class CampaignsApi(ApiView):
    """The client's campaigns: list them, create one, or dry-run one (``dry_run: true``)."""

    required_scope = Scope.CAMPAIGNS
    max_body_bytes = CAMPAIGN_BODY_MAX

    @extend_schema(
        operation_id="campaign_list",
        tags=["Campaigns"],
        summary="List the client's campaigns",
        parameters=[CampaignListQuery],
        responses={200: CampaignPageOut, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = validated(CampaignListQuery, request.query_params)
        page = selectors.campaign_page(
            principal(request).client_id,
            status=query.get("status"),
            cursor=query.get("cursor"),
            limit=query["limit"],
        )
        return Response(CampaignPageOut(page).data)

    @extend_schema(
        operation_id="campaign_create",
        tags=["Campaigns"],
        summary="Create a campaign, or dry-run one",
        description=(
            "Business rules the schema cannot express (each answers 400): a `uids` audience "
            "needs one valid uid (entries that are not uids are counted as skipped, not "
            "refused); a `followers_filter`'s `followed_before` must be after its "
            "`followed_after`."
        ),
        request=CampaignCreateIn,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="a retried create with the same key and body returns the same "
                "campaign (200); the same key with another body answers 409",
            )
        ],
        responses={
            201: CampaignOut,
            200: OpenApiResponse(
                REPLAY_OR_PREVIEW,
                "an Idempotency-Key replay (the campaign), or with `dry_run: true` the preview "
                "(nothing stored)",
            ),
            409: OpenApiResponse(ERROR_SCHEMA, "Idempotency-Key reused for another body"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(CampaignCreateIn, request.data)
        sender = data["sender_uid"]
        require_sender(request, sender)
        client = client_of(request)
        if data["dry_run"]:
            preview = services.campaign_preview(
                sender_uid=sender,
                audience_spec=data["audience"],
                channel=data["channel"],
                client=client,
            )
            return Response(DryRunOut(preview).data)
        campaign, created = services.campaign_submit(
            sender_uid=sender,
            content=data["content"],
            audience_spec=data["audience"],
            channel=data["channel"],
            scheduled_at=data["scheduled_at"],
            client=client,
            idempotency_key=idempotency_key(request),
            name=data["name"],
        )
        return Response(campaign_body(campaign), status=201 if created else 200)


def owned_campaign(request: Request, campaign_id: str) -> Campaign:
    pk = path_ids(campaign_id=campaign_id)["campaign_id"]
    return selectors.campaign_for_client(principal(request).client_id, pk)


class CampaignApi(ApiView):
    """One campaign's status and progress (delivered, skipped, failed, rate, ETA)."""

    required_scope = Scope.CAMPAIGNS

    @extend_schema(
        operation_id="campaign_get",
        tags=["Campaigns"],
        summary="A campaign's status and progress",
        responses={200: CampaignOut, **ERRORS},
    )
    def get(self, request: Request, campaign_id: str) -> Response:
        return Response(campaign_body(owned_campaign(request, campaign_id)))


class CampaignActionApi(ApiView):
    """Pause, resume or cancel; takes effect between batches. Impossible transitions → 409."""

    required_scope = Scope.CAMPAIGNS

    def act(self, request: Request, campaign_id: str, action: Callable[..., Campaign]) -> Response:
        campaign = owned_campaign(request, campaign_id)
        return Response(campaign_body(action(campaign_id=campaign.pk)))


ACTION_RESPONSES = {
    200: CampaignOut,
    409: OpenApiResponse(ERROR_SCHEMA, "the campaign's status does not allow it"),
    **ERRORS,
}


class CampaignPauseApi(CampaignActionApi):
    """Pause: no further batch starts; ``pause_reason`` becomes ``manual``."""

    @extend_schema(
        operation_id="campaign_pause",
        tags=["Campaigns"],
        summary="Pause a campaign",
        request=None,
        responses=ACTION_RESPONSES,
    )
    def post(self, request: Request, campaign_id: str) -> Response:
        return self.act(request, campaign_id, services.campaign_pause)


class CampaignResumeApi(CampaignActionApi):
    """Resume a paused campaign where it stopped."""

    @extend_schema(
        operation_id="campaign_resume",
        tags=["Campaigns"],
        summary="Resume a paused campaign",
        request=None,
        responses=ACTION_RESPONSES,
    )
    def post(self, request: Request, campaign_id: str) -> Response:
        return self.act(request, campaign_id, services.campaign_resume)


class CampaignCancelApi(CampaignActionApi):
    """Cancel for good: batches not yet sent never are."""

    @extend_schema(
        operation_id="campaign_cancel",
        tags=["Campaigns"],
        summary="Cancel a campaign",
        request=None,
        responses=ACTION_RESPONSES,
    )
    def post(self, request: Request, campaign_id: str) -> Response:
        return self.act(request, campaign_id, services.campaign_cancel)
