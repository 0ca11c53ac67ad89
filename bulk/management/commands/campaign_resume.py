"""``manage.py campaign_resume ID [ID ...] [--json]``

Resume paused campaigns: what they still owe is enqueued again.
The admin's own action (bulk/management/commands/_campaigns.py); exit 1 naming each
campaign not found or whose status does not allow it.
"""

from bulk.management.commands._campaigns import CampaignActionCommand


class Command(CampaignActionCommand):
    help = "Resume paused campaigns: what they still owe is enqueued again."
    action = "resume"
    done = "resumed"
