"""Print a new VAPID key for WEB_PUSH_VAPID_KEY (and the public key the browsers will be given)."""

from __future__ import annotations

import base64
from typing import Any

from django.core.management.base import BaseCommand
from py_vapid import Vapid02


class Command(BaseCommand):
    help = "Print a new Web Push VAPID private key for WEB_PUSH_VAPID_KEY (keep it secret)."

    def handle(self, *args: Any, **options: Any) -> None:
        key = Vapid02()
        key.generate_keys()
        raw = key.private_key.private_numbers().private_value.to_bytes(32, "big")
        self.stdout.write(f"WEB_PUSH_VAPID_KEY={base64.urlsafe_b64encode(raw).rstrip(b'=').decode()}")
