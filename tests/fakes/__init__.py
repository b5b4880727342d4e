"""Loopback fakes of hosted APIs: real HTTP servers on 127.0.0.1 speaking each API's wire format.

Tests point the real SDK clients at them with `base_url`, so the SDKs' own request building,
response parsing and retries run unchanged.
"""

from .loopback import Fault, LoopbackServer, RecordedRequest

__all__ = ["Fault", "LoopbackServer", "RecordedRequest"]
