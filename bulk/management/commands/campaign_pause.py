"""``manage.py campaign_pause ID [ID ...] [--json]``

Pause running campaigns: no further batch starts until resumed.
The admin's own action (bulk/management/commands/_campaigns.py); exit 1 naming each
campaign not found or whose status does not allow it.
"""

from bulk.management.commands._campaigns import CampaignActionCommand


class Command(CampaignActionCommand):
    help = "Pause running campaigns: no further batch starts until resumed."
    action = "pause"
    done = "paused"
