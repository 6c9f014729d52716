"""The ASGI application (`config.asgi:application`) that daphne serves: HTTP and WebSocket.

HTTP goes through the admission edge (cheap answers from process-local snapshots), then
the claim lane for the reserve API (sale/lane.py: claims batched per drop), then Django.
WebSockets are the waiting room's live position, opened from the same snapshots. No auth
middleware on them: the queue's message is public, and loading a session and a user per
handshake would be two queries on Django's one sync thread for nothing.
"""

from __future__ import annotations

import os
from typing import cast

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

# Needs Django set up first.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from admission import edge as admission_edge  # noqa: E402
from admission.routing import websocket_urlpatterns  # noqa: E402
from admission.tally import Tally  # noqa: E402
from core.asgi import ASGIApp  # noqa: E402
from ops.duties import keeper  # noqa: E402
from sale.lane import Lane  # noqa: E402

lane = Lane()
# keeper.start: this process covers beat's duties while Celery is late with them (ops/duties.py).
edge = admission_edge.serve(cast(ASGIApp, django_asgi_app), lane=lane, on_start=keeper.start)
lane.on_sold_out = edge.note_sold_out

application = ProtocolTypeRouter(
    {
        "http": Tally(edge),  # each drop's refusals and errors, counted for its report (fairness/)
        "lifespan": edge,  # the server's start: the lane's threads and connections warmed
        "websocket": AllowedHostsOriginValidator(URLRouter(websocket_urlpatterns)),
    }
)
