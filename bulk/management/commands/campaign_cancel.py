"""``manage.py campaign_cancel ID [ID ...] [--json]``

Cancel campaigns: no further batch starts; what was delivered stays.
The admin's own action (bulk/management/commands/_campaigns.py); exit 1 naming each
campaign not found or whose status does not allow it.
"""

from bulk.management.commands._campaigns import CampaignActionCommand


class Command(CampaignActionCommand):
    help = "Cancel campaigns: no further batch starts; what was delivered stays."
    action = "cancel"
    done = "cancelled"
