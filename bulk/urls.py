"""Campaign API routes (mounted under /api/v1/). Ids are matched as text and validated by the
views, so a malformed id answers 400 naming the field instead of an HTML 404."""

from django.urls import path

from bulk import apis

CAMPAIGN = "campaigns/<str:campaign_id>"

urlpatterns = [
    path("audiences", apis.AudienceUploadApi.as_view(), name="audience-upload"),
    path("campaigns", apis.CampaignsApi.as_view(), name="campaigns"),
    path(CAMPAIGN, apis.CampaignApi.as_view(), name="campaign"),
    path(f"{CAMPAIGN}/pause", apis.CampaignPauseApi.as_view(), name="campaign-pause"),
    path(f"{CAMPAIGN}/resume", apis.CampaignResumeApi.as_view(), name="campaign-resume"),
    path(f"{CAMPAIGN}/cancel", apis.CampaignCancelApi.as_view(), name="campaign-cancel"),
]
