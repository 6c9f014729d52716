"""The merchant's and on-call's tools: the admin, the dashboard, the kill switch, /metrics, the duties.

The admin (ops.site.ShopAdminSite, installed as admin.site by ops.admin_app): a module per model
(product_admin, drop_admin, variant_admin, presale_admin, discount_admin). Each change calls one
service inside the admin's transaction, and a change that cannot be made is a form error. It
speaks the merchant's words: money in its currency (never minor units), times on SHOP_TIME_ZONE,
the tuning a merchant never needs under the folded "Advanced" fieldset, the plumbing
(PLUMBING_APPS, PLUMBING_MODELS) under "Behind the scenes". Its words are translated; admin log
entries and the commands' output are not (tests/ops/test_admin_i18n.py). The drop list says what
is left (inventory.selectors.variants_left); the sales chart (ops/sales.py) starts at the first
sale.

Access (ops/access.py): every admin action names its permissions and every custom view and ops
route checks one; the dashboard, the ops API and /metrics need staff with shop.view_drop or
shop.pause_drop (Merchants and On-call). tests/ops/test_permission_walk.py tries every door.

The kill switch (ops/switch.py, the pause_drop and resume_drop commands), the watchdog
(ops.watch_invariants: a drifting drop is paused), /metrics (ops/metrics.py), the deploy checks
floodgate-web runs before it serves (ops/checks.py, tag floodgate), the draw's beacon preflight
(ops/preflight.py).

The duties' cover (ops/duties.py). Beat and the worker are one process each, and a waiting-room
sale needs their duties every second, so every web process keeps a thread that covers for them:
each duty has a row in ops_duty; a Celery run stamps scheduled_ran_at (a task_success signal in
config/celery.py); once a second each web process takes the duties whose Celery runs are older
than two periods and a second by one conditional UPDATE (TAKE_LATE_DUTIES), as a lease of two
periods and two seconds, renewed while Celery stays late and by a heartbeat during a long run;
a Celery run clears the lease. Each duty has one body (ops/schedule.py, the table beat's
schedule and the tasks come from), the same in Celery's task and in the cover.
The lease is a PostgreSQL row, not a Redis key or an advisory lock: the duties that matter most
when things break need only PostgreSQL, a session lock would not survive PgBouncer and a
transaction-scoped one cannot span a run of many transactions. /metrics exports each duty's age
(alerts FloodgateDutyCovered, FloodgateDutyLate); DUTY_TAKEOVER=0 turns the cover off.

Rehearsals (ops/rehearsal.py): the engine is dev tooling (Locust patches the standard library
with gevent), so the admin starts `python -m devtools.rehearse` as a process of its own, which
keeps its files under REHEARSAL_DIR and hands its report to `keep_report` (an ops.RehearsalReport
row, so every replica shows it); no arrow points into devtools. A copy's payments go to the
simulator, and `end` (on the command's exit or SIGTERM, or the ops.end_rehearsals duty) removes
its buyers.
"""
