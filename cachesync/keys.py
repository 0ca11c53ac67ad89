"""cachesync's Redis keys.

cachesync:lag   hash {lag: seconds behind the primary's commits, at: unix time of the
                sample}: written by the follower, read by the /metrics gauge (lag.py)
"""

from __future__ import annotations

LAG = "cachesync:lag"
