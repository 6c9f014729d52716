"""Floodgate settings, all from the environment (see README.md for the variables).

Production is the default: DEBUG off, a SECRET_KEY required, HTTPS-only cookies.
FLOODGATE_PROFILE=dev (set by `floodgate.py run` and `floodgate.py test`) relaxes
that for a laptop.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from csp.constants import NONCE, NONE, SELF
from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

from core import env
from ops.schedule import beat_schedule

BASE_DIR = Path(__file__).resolve().parent.parent
PROFILE = os.environ.get("FLOODGATE_PROFILE", "production")
DEV = PROFILE == "dev"

DEBUG = env.flag("DEBUG", default=DEV)
# Signs sessions, admission tokens and queue tickets; outside dev never the published dev key.
SECRET_KEY = env.secret_key("SECRET_KEY", dev=DEV, dev_value="dev-only-insecure-key-never-in-production")
ALLOWED_HOSTS = env.listing("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEV else [])
CSRF_TRUSTED_ORIGINS = env.listing("CSRF_TRUSTED_ORIGINS", [])

AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out admin login before any password is checked (django-axes).
    "accounts.throttle.AdminLoginBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Buyers log in by e-mail (or the username of an account made before e-mail sign-up).
    "allauth.account.auth_backends.AuthenticationBackend",
    "shop.auth.BearerTokenBackend",  # Authorization: Bearer <token> on the API
]

INSTALLED_APPS = [
    "daphne",
    "ops.admin_app.ShopAdminConfig",  # django.contrib.admin, its home split (ops.site)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "allauth",
    "allauth.account",
    "axes",
    "drf_spectacular_sidecar",  # only its static files: Swagger UI for /docs/api/
    "shop",
    "inventory",
    "catalogue",
    "holds",
    "admission",
    "sale",
    "checkout",
    "fairness",
    "ops",
    "storefront",
    "accounts",
]

MIDDLEWARE = [
    "core.middleware.RefuseTrace",
    "core.middleware.RefuseControlCharacters",  # NUL and the like in a path: 404, not a view's 500
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The buyer's language: the switcher's cookie, else the browser's Accept-Language, else English.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # The signed-in buyer's language, written when it changes: their e-mails are written in it.
    "accounts.middleware.RememberLanguage",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY below
    "allauth.account.middleware.AccountMiddleware",
    # Last, as django-axes asks: turns a locked-out admin login into its 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.database(env.required("DATABASE_URL"))}
# psycopg 3's pool: a web process keeps warm connections instead of opening one per request.
DATABASES["default"]["CONN_MAX_AGE"] = 0
# Kept open: one per claim-lane and edge thread plus Django's own, so a crowd arriving after a
# quiet spell does not wait for new backends to fork (the pool shrinks to this after 10 idle minutes).
_POOL_MAX = env.integer("DB_POOL_MAX_SIZE", 20)
DATABASES["default"]["OPTIONS"]["pool"] = {
    "min_size": min(env.integer("DB_POOL_MIN_SIZE", 8), _POOL_MAX),
    "max_size": _POOL_MAX,
    "timeout": env.integer("DB_POOL_TIMEOUT", 10),
    # psycopg_pool doubles the delay between reconnection attempts with no cap until this runs
    # out: after a 20 s failover it tried again ~8 s late. Giving up after a few seconds lets the
    # next waiting request start a fresh attempt at once (measured: docs/SCALING.md §2).
    "reconnect_timeout": env.integer("DB_POOL_RECONNECT_TIMEOUT", 3),
}
# PgBouncer in transaction mode (DB_POOLER=pgbouncer) gives each transaction whichever server
# connection is free: psycopg must never prepare a statement (PgBouncer before 1.21, Debian 12's
# 1.18 among them, cannot follow one across connections) and Django must not keep a server-side
# cursor open between transactions. Nothing else lives on a session (docs/SCALING.md).
if env.pooler("DB_POOLER") == "pgbouncer":
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = None
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.required("REDIS_URL")
# Redis behind Sentinel: with REDIS_SENTINELS (host:port,...) every client (the cache, and through
# it the gate, the rate limits and the snapshots; Celery's broker; the Channels layer; the edge's
# and the lane's own) asks the sentinels for the master of REDIS_SENTINEL_MASTER and follows a
# promoted replica. REDIS_URL then names only the database number.
REDIS_SENTINELS = env.addresses("REDIS_SENTINELS")
REDIS_SENTINEL_MASTER = env.sentinel_master(
    "REDIS_SENTINEL_MASTER", redis_url=REDIS_URL, used=bool(REDIS_SENTINELS)
)
REDIS_DB = env.redis_db(REDIS_URL) if REDIS_SENTINELS else 0
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "fg",
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 1, "SOCKET_TIMEOUT": 1},
    }
}
if REDIS_SENTINELS:
    # The master's pool only (django-redis's SentinelClient would read from replicas: stale counts).
    DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
    CACHES["default"]["LOCATION"] = f"redis://{REDIS_SENTINEL_MASTER}/{REDIS_DB}"
    CACHES["default"]["OPTIONS"] |= {
        "SENTINELS": REDIS_SENTINELS,
        "SENTINEL_KWARGS": {"socket_timeout": 1, "socket_connect_timeout": 1},
    }
CHANNEL_LAYERS = {
    "default": {
        # Pub/sub: a group message is one PUBLISH that each web process receives once and hands
        # to its own sockets, so a wave to 5,000 waiting clients is not 5,000 Redis messages.
        # Messages are not kept for a process that is away: each carries the whole state, and
        # a client reconnecting gets the current one at once.
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        # redis-py 8 gives up on a read after 5 s by default; keep a longer read timeout.
        "CONFIG": {
            "hosts": [
                {
                    "master_name": REDIS_SENTINEL_MASTER,
                    "sentinels": REDIS_SENTINELS,
                    "sentinel_kwargs": {"socket_timeout": 1, "socket_connect_timeout": 1},
                    "db": REDIS_DB,
                    "socket_timeout": 10,
                }
                if REDIS_SENTINELS
                else {"address": REDIS_URL, "socket_timeout": 10}
            ],
            "prefix": "fg-channels",
        },
    }
}

CELERY_BROKER_URL = (
    ";".join(f"sentinel://{f'[{h}]' if ':' in h else h}:{p}/{REDIS_DB}" for h, p in REDIS_SENTINELS)
    or REDIS_URL
)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A task whose worker died unacknowledged is redelivered after this many seconds.
# Workers look for such orphans every CELERY_RESTORE_INTERVAL seconds.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.integer("CELERY_VISIBILITY_TIMEOUT", 300),
    "unacked_restore_interval": env.integer("CELERY_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": 1,
    **(
        {
            "master_name": REDIS_SENTINEL_MASTER,
            "sentinel_kwargs": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
        if REDIS_SENTINELS
        else {}
    ),
}
# Every duty of the table in ops/schedule.py on its period, the env's where it names one
# (RECLAIM_EVERY_SECONDS, REMINDERS_EVERY_SECONDS, WATCHDOG_EVERY_SECONDS).
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = beat_schedule()

# Web processes run a scheduled duty themselves while Celery's runs of it are late (beat or the
# worker down: ops/duties.py); 0 leaves the sale to Celery alone (tests turn it on where they test it).
DUTY_TAKEOVER = env.flag("DUTY_TAKEOVER", default=True)

# `floodgate.py test` sets FAST_PASSWORD_HASHING: the suite makes and logs in accounts by the hundred,
# and each PBKDF2 hash costs ~0.3 s here. MD5 comes first for new hashes; Django's list follows, so
# a real hash still verifies. Only the dev profile honours it: production hashes with PBKDF2, always.
FAST_PASSWORD_HASHING = DEV and env.flag("FAST_PASSWORD_HASHING", default=False)
PASSWORD_HASHERS = [
    *(["django.contrib.auth.hashers.MD5PasswordHasher"] if FAST_PASSWORD_HASHING else []),
    *global_settings.PASSWORD_HASHERS,
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Buyer accounts (django-allauth, accounts/__init__.py): sign up with an e-mail address, which
# must be verified before the first login; log in with it (or with the username of an account made
# before, by create_buyers or the admin).
ACCOUNT_LOGIN_METHODS = {"email", "username"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_CONFIRM_EMAIL_ON_GET = False  # a link scanner's GET must not verify an address: the page posts
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
ACCOUNT_DEFAULT_HTTP_PROTOCOL = "http" if DEV else "https"
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"
ACCOUNT_FORMS = {
    "login": "accounts.forms.LoginForm",
    "signup": "accounts.forms.SignupForm",
    "reset_password": "accounts.forms.ResetPasswordForm",
}
# Counted in the Redis cache, per client address (the adapter reads it as admission.limits does)
# and per e-mail address ("key"). Sign-up is tight: free accounts are how a crowd stuffs a waiting room.
ACCOUNT_RATE_LIMITS = {
    "signup": os.environ.get("SIGNUP_RATE_LIMIT", "3/m/ip,10/h/ip"),
    "login": "30/m/ip",
    "login_failed": "10/m/ip,5/5m/key",
    "reset_password": "5/m/ip,3/h/key",
    "reset_password_from_key": "20/m/ip",
    "confirm_email": "1/3m/key",
    "change_password": "5/m/user",
    "manage_email": "10/m/user",
}

# The admin login (django-axes): the AXES_FAILURE_LIMIT-th wrong password from one address locks
# that address out of /admin/ login for AXES_COOLOFF_TIME, right password or not; a staff account's
# logins count and are refused on the shop's login too. Buyers' logins are allauth's to limit
# (above); accounts.throttle decides which logins axes sees.
AXES_FAILURE_LIMIT = env.integer("ADMIN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env.integer("ADMIN_LOGIN_COOLOFF_MINUTES", 15))
# Locked by address or by account (either reaching the limit), the account named case-insensitively
# whichever door and spelling (accounts.throttle.account_key); attempts made while locked are
# refused before any password hash and not counted (the lock ends AXES_COOLOFF_TIME after it began).
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_USERNAME_CALLABLE = "accounts.throttle.account_key"
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_ONLY_ADMIN_SITE = False  # accounts.throttle.AdminLoginHandler picks the logins itself
AXES_HANDLER = "accounts.throttle.AdminLoginHandler"
AXES_CLIENT_IP_CALLABLE = "core.clients.client_ip"
AXES_LOCKOUT_TEMPLATE = "admin/locked_out.html"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# The shop speaks English and German (locale/, compiled by `python -m devtools.po`); a merchant adds
# a language with its django.po and a line here (docs/RUNBOOK.md, "Languages").
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_SAMESITE = "Lax"
# Date and time formats with the zone (config/formats): the admin's lists and pages say "CET", "UTC".
FORMAT_MODULE_PATH = ["config.formats"]
# The merchant's zone: the admin shows every time on this clock (Django's current zone, as no
# request activates another); the database and the API keep UTC. Django refuses an unknown name.
TIME_ZONE = os.environ.get("SHOP_TIME_ZONE", "").strip() or "UTC"
USE_I18N = True
USE_TZ = True
# Tax (shop.pricing): whether a product's price includes its tax_rate (gross, as EU shops show
# buyers) or has it added at checkout (net, as US shops do); the buyer is charged the gross
# either way. TAX_NAME is what pages, e-mails and the footer call it.
PRICES_INCLUDE_TAX = env.flag("PRICES_INCLUDE_TAX", default=True)  # the start; then the Shop admin's
TAX_NAME = os.environ.get("TAX_NAME", "").strip()[:20] or "VAT"

STATIC_URL = "static/"
# Uploaded product pictures. With several web instances, MEDIA_ROOT must be storage they share
# (compose mounts one volume on every replica).
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT") or BASE_DIR / ".data" / "media")
# Where collectstatic writes (and the production storage reads its manifest, ops/checks.py).
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEV
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEV

# HTTPS in production; a laptop serves plain HTTP.
# Every page: scripts and styles from the shop's own origin only, plus the inline blocks our
# templates mark with the request's nonce (`{{ request.csp_nonce }}`): an injected <script> or
# on*= handler does not run, even where an escape was missed. The WebSocket is same-origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        # the waiting room's proof of work runs in a Worker the page's own script makes from a blob
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
    }
}
SECURE_SSL_REDIRECT = env.flag("SECURE_SSL_REDIRECT", default=not DEV)
SESSION_COOKIE_SECURE = env.flag("SESSION_COOKIE_SECURE", default=not DEV)
CSRF_COOKIE_SECURE = env.flag("CSRF_COOKIE_SECURE", default=not DEV)
LANGUAGE_COOKIE_SECURE = CSRF_COOKIE_SECURE  # the language cookie rides HTTPS like the others
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", 0 if DEV else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEV
SECURE_HSTS_PRELOAD = not DEV
# Behind reverse proxies (TLS ends there; compose: a TLS proxy, then HAProxy) that set
# X-Forwarded-Proto and each append an address to X-Forwarded-For: TRUSTED_PROXY_HOPS counts them
# and core.clients takes the client from that many entries from the right. 0: neither header is
# believed (a client could send either). TRUST_X_FORWARDED_FOR=1, the older switch, means 1 hop.
TRUSTED_PROXY_HOPS = env.integer("TRUSTED_PROXY_HOPS", int(env.flag("TRUST_X_FORWARDED_FOR", default=False)))
if not 0 <= TRUSTED_PROXY_HOPS <= 10:
    raise ImproperlyConfigured(f"TRUSTED_PROXY_HOPS={TRUSTED_PROXY_HOPS} is not a count of proxies (0-10).")
TRUST_X_FORWARDED_FOR = TRUSTED_PROXY_HOPS > 0
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUST_X_FORWARDED_FOR else None
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# Payments: the provider adapter (checkout.providers) and where the provider calls us back.
# Outside dev the simulator is refused unless this is a rehearsal environment (no real buyers).
ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL = env.flag("ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL", default=False)
PAYMENT_PROVIDER = env.payment_provider(
    "PAYMENT_PROVIDER", dev=DEV, rehearsal_flag="ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL"
)
# The shop's name until the merchant sets the shop's identity (shop.identity: admin or
# `manage.py configure_shop`), which then names it everywhere a buyer reads.
SHOP_NAME = os.environ.get("SHOP_NAME", "Floodgate")
PAYMENT_PROVIDER_URL = (
    os.environ.get("PAYMENT_PROVIDER_URL") or "http://127.0.0.1:8701"
    if DEV
    else env.required("PAYMENT_PROVIDER_URL")
)
PAYMENT_PROVIDER_SECRET = env.secret("PAYMENT_PROVIDER_SECRET", dev=DEV, dev_value="sim-secret-dev")
# Webhooks are verified with their own secret: a leaked API key cannot forge a payment.
PAYMENT_WEBHOOK_SECRET = env.secret("PAYMENT_WEBHOOK_SECRET", dev=DEV, dev_value="sim-webhook-secret-dev")
# This shop's own address: the provider's callbacks and the buyer's way back.
PUBLIC_BASE_URL = (
    os.environ.get("PUBLIC_BASE_URL") or "http://127.0.0.1:8000" if DEV else env.required("PUBLIC_BASE_URL")
)
# Where rehearsals (issue 13 §4, devtools/rehearse.py) write their reports; the admin links them.
REHEARSAL_DIR = Path(os.environ.get("REHEARSAL_DIR") or BASE_DIR / ".data" / "rehearsals")
# The largest crowd a rehearsal may make. A rehearsal aims that crowd at PUBLIC_BASE_URL, so
# production allows none until a merchant sets how many the shop can take beside real buyers.
REHEARSAL_MAX_BUYERS = env.integer("REHEARSAL_MAX_BUYERS", 20_000 if DEV else 0)
# Buyers are only ever sent to the provider's own pages (no open redirect): by default the
# configured provider's own origin (Stripe's pay page is the shop's own, the simulator's is its URL).
PAYMENT_PROVIDER_PUBLIC_PREFIXES = tuple(
    env.listing(
        "PAYMENT_PROVIDER_PUBLIC_PREFIXES",
        ["http://127.0.0.1:", "http://localhost:"]
        if DEV
        else [env.origin(PUBLIC_BASE_URL if PAYMENT_PROVIDER == "stripe" else PAYMENT_PROVIDER_URL)],
    )
)
MERCHANT_WEBHOOK_URL = os.environ.get("MERCHANT_WEBHOOK_URL", "")
# Who is e-mailed of a dispute (comma-separated addresses); none: the Merchants group's members.
MERCHANT_EMAIL = env.listing("MERCHANT_EMAIL", [])
# Web Push (checkout/push.py): the shop's VAPID private key, the raw P-256 key base64url
# (`manage.py vapid_key` makes one). Unset outside dev: push is off (no button, nothing sent). The
# dev key is published here, so it never signs a production push.
WEB_PUSH_VAPID_KEY = os.environ.get("WEB_PUSH_VAPID_KEY") or (env.DEV_VAPID_KEY if DEV else "")
# VAPID's contact for the push services (mailto: or https:); empty: PUBLIC_BASE_URL.
WEB_PUSH_SUBJECT = os.environ.get("WEB_PUSH_SUBJECT", "")
# The push services a subscription may point at (host names and their subdomains): the shop POSTs to
# that address, so nothing else (its own network) is taken. The browsers' own services by default.
WEB_PUSH_HOSTS = env.listing(
    "WEB_PUSH_HOSTS",
    ["fcm.googleapis.com", "push.services.mozilla.com", "push.apple.com", "notify.windows.com"],
)
# How long an erased buyer's shipping addresses stay with their orders (accounts.privacy): the
# retention a merchant's records need (German HGB/AO: ten years); blanked after it.
ORDER_RECORDS_RETENTION_DAYS = env.integer("ORDER_RECORDS_RETENTION_DAYS", 3650)
# PAYMENT_PROVIDER=stripe (checkout/providers/stripe.py): the keys from Stripe's dashboard, and the
# signing secret of the webhook endpoint <PUBLIC_BASE_URL>/checkout/webhooks/stripe. STRIPE_API_BASE
# and STRIPE_JS_URL point the library and the pay page elsewhere (the tests: at localstripe).
_STRIPE = PAYMENT_PROVIDER == "stripe" and not DEV
STRIPE_SECRET_KEY = env.required("STRIPE_SECRET_KEY") if _STRIPE else os.environ.get("STRIPE_SECRET_KEY", "")
STRIPE_PUBLISHABLE_KEY = (
    env.required("STRIPE_PUBLISHABLE_KEY") if _STRIPE else os.environ.get("STRIPE_PUBLISHABLE_KEY", "")
)
STRIPE_WEBHOOK_SECRET = (
    env.required("STRIPE_WEBHOOK_SECRET") if _STRIPE else os.environ.get("STRIPE_WEBHOOK_SECRET", "")
)
STRIPE_API_BASE = os.environ.get("STRIPE_API_BASE") or "https://api.stripe.com"
STRIPE_JS_URL = os.environ.get("STRIPE_JS_URL") or "https://js.stripe.com/v3/"

# Development keeps each message in a file under EMAIL_FILE_PATH and logs one line per message.
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "core.mail.DevEmailBackend" if DEV else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(BASE_DIR / ".data" / "mail"))
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env.integer("EMAIL_PORT", 25)
EMAIL_TIMEOUT = env.integer("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "orders@floodgate.invalid")

# Prometheus scrapes /metrics with `Authorization: Bearer <METRICS_TOKEN>` (staff may look too).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")

# Celery's "sent / received / succeeded" line for every run of a scheduled task (config/celery.py):
# off, the tick's three a second would bury the request log.
LOG_HOUSEKEEPING = env.flag("LOG_HOUSEKEEPING", default=False)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# The waiting room and the crowd (admission app).
# How long an admission token lets an admitted buyer claim before asking for a fresh one.
ADMISSION_TOKEN_SECONDS = env.integer("ADMISSION_TOKEN_SECONDS", 120)
# How long an admitted buyer who has not reserved yet still holds back the next waves. Shorter
# than the token: accounts admitted and never coming (no-shows, or a farm of sign-ups) stall the
# line for this long, not for a token's life; a late one may still buy while the token lasts.
ADMISSION_GRACE_SECONDS = env.integer("ADMISSION_GRACE_SECONDS", 30)
# How long a queue ticket (the signed "this is my place" the edge answers polls from) is honoured;
# longer than any sale's wait. After it the poll goes to Django, which signs a fresh one.
QUEUE_TICKET_SECONDS = env.integer("QUEUE_TICKET_SECONDS", 12 * 3600)
# The draw's public randomness (admission/beacon.py): the drand chain a queue names a future round
# of when it is created ("quicknet", "mainnet"; "" names none: the seed and the entry list alone),
# and the relays asked for that round at the draw. One that cannot be reached: the draw says so and
# falls back to the committed seed.
DRAW_BEACON = os.environ.get("DRAW_BEACON", "quicknet").strip()
if DRAW_BEACON not in {"", "quicknet", "mainnet"}:
    raise ImproperlyConfigured(f"DRAW_BEACON must be quicknet, mainnet or empty (none), not {DRAW_BEACON!r}")
DRAW_BEACON_URLS = env.listing("DRAW_BEACON_URLS", ["https://api.drand.sh", "https://drand.cloudflare.com"])
# How long a join's proof-of-work challenge lasts (admission/work.py): work is done in this window.
JOIN_WORK_CHALLENGE_SECONDS = env.integer("JOIN_WORK_CHALLENGE_SECONDS", 300)
# Token buckets per account and per client address: a burst of RATE_BURST, then RATE_PER_SECOND.
RATE_LIMIT_BURST = env.integer("RATE_LIMIT_BURST", 10)
RATE_LIMIT_PER_SECOND = env.integer("RATE_LIMIT_PER_SECOND", 1)
IP_RATE_LIMIT_BURST = env.integer("IP_RATE_LIMIT_BURST", 100)
IP_RATE_LIMIT_PER_SECOND = env.integer("IP_RATE_LIMIT_PER_SECOND", 20)
# Waiting-room WebSockets one client address may hold open per web process (a household or an
# office shares an address; a client opening hundreds is not a page).
WS_SOCKETS_PER_ADDRESS = env.integer("WS_SOCKETS_PER_ADDRESS", 50)
# Claim attempts one process lets through to the database at once; beyond it, 503 Retry-After.
CLAIM_CONCURRENCY = env.integer("CLAIM_CONCURRENCY", 16)
