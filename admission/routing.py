"""WebSocket routes of the waiting room."""

from __future__ import annotations

from django.urls import path, re_path

from admission import consumers

websocket_urlpatterns = [
    path("ws/drops/<slug:slug>/queue/", consumers.QueueConsumer.as_asgi()),
    re_path(r"", consumers.NoRoute.as_asgi()),
]
