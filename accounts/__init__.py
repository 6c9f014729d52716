"""What is ours around django-allauth and django-axes: sign-in, the API token page, lockouts, data.

- adapter.py reads the client's address from core.clients, so allauth's limits (sign-up per
  address, failed logins per account and address, reset mails per address, in the Redis cache)
  and the waiting room agree on who a client is; it names stages.py's login stage, which lets an
  account with no e-mail address in and asks it to add one (named, not imported: importing
  allauth's stages from the adapter is an import cycle at start-up).
- forms.py gives allauth's forms the shop's words.
- throttle.py keeps django-axes to the logins that can open the admin: the admin's, and any login
  whose name finds a staff account. axes counts failures per address and per account (the
  username in lower case) and refuses either at both doors; a right password forgets only its own
  account's failures from its own address. Locked attempts are refused before any password hash
  (axes' backend is first), since a hash (~0.3 s) holds the one sync thread
  (tests/accounts/test_client_lockout.py counts the hashes).
- admin.py gives allauth's and axes' actions the permissions they lacked.
- services.py and views.py: the API access page (tokens made and revoked through catalogue). A
  deleted token, a deactivated or deleted account and a logout call `credentials_revoked`, which
  after the commit drops the buyer from this process's lane and publishes the buyer on Redis
  (admission.state.revoke); every edge forgets that buyer's cached tokens and sessions and sends
  their queue tickets to Django once. Redis is only the messenger: every claim statement checks
  the account is active.
- middleware.py (`RememberLanguage`, after LocaleMiddleware) records a signed-in session's
  language, writing only on a change.
- privacy.py: /accounts/data/ downloads everything kept about a buyer and erases them on a typed
  confirmation. The account row stays (holds, orders and tickets point at it) with its name,
  e-mail and password gone; the addresses orders shipped to are kept for
  ORDER_RECORDS_RETENTION_DAYS, then blanked by forget_expired_records
  (tests/accounts/test_privacy.py).

A shop login needs a verified e-mail address (ACCOUNT_EMAIL_VERIFICATION "mandatory"); the admin
login is Django's own form.
"""
