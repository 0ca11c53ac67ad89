"""``manage.py campaign_recall ID [ID ...] [--json]``

Recall campaigns' messages from every recipient (a running one is cancelled).
The admin's own action (bulk/management/commands/_campaigns.py); exit 1 naming each
campaign not found or whose status does not allow it.
"""

from bulk.management.commands._campaigns import CampaignActionCommand


class Command(CampaignActionCommand):
    help = "Recall campaigns' messages from every recipient (a running one is cancelled)."
    action = "recall"
    done = "recalled"
