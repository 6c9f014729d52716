"""The project's wiring: settings, URLs, the ASGI stack, the Celery app and the API's schema.

config/asgi.py stacks the edge (admission), the claim lane (sale), Django and the WebSocket
routes; config/web.py is floodgate-web (granian, one worker process per core, each reading up to
16,384 open connections). config/celery.py is the Celery app; beat's schedule is
CELERY_BEAT_SCHEDULE in config/settings.py. The API's own pages (/api/, its schema, /docs/api/)
come from the layers' answer models: config/schemas.py gathers them, config/api.py writes the
document. Every Django page carries a Content-Security-Policy (CONTENT_SECURITY_POLICY in
settings.py): scripts and styles from the shop's origin or inline blocks with the response's
nonce; a style set from a script goes through the CSSOM. The edge's and the lane's JSON answers
carry none.
"""

# Load the Celery app with Django, so shared_task sends to Floodgate's broker (not Celery's default).
from config.celery import app as celery_app

__all__ = ["celery_app"]
