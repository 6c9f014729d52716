"""The rehearsal's crowd: Locust (headless, as a library) walks each buyer through the whole flow.

`python -m devtools.rehearse_crowd PLAN.json EVENTS.csv`. Its own process, because Locust
monkey-patches the standard library with gevent at import; the Django side (devtools/rehearse.py)
never imports it. Every answer is one CSV line: seconds since start, step, status, code, ms.
"""

from __future__ import annotations

import csv
import json
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import gevent
from locust import FastHttpUser, events, task
from locust.env import Environment
from locust.exception import StopUser

STEPS_AFTER_NO = 3  # a loser asks this many more times, a second apart, before going home
CARDS = 3  # a declined buyer tries again with another card, as often
CONFIRM_PATIENCE = 600.0  # seconds a paid buyer polls the order (the crowd's --max-seconds ends it sooner)


class Plan:
    """What devtools/rehearse.py decided: the store, the copy's slug, the buyers' tokens."""

    base = ""
    slug = ""
    waiting_room = False
    tokens: list[str] = []
    max_seconds = 120.0
    sizes: dict[str, int] = {}  # a sized drop's variants and their stock: buyers ask in proportion
    ship_to = ""  # a product that ships: the country of every buyer's address


class Buyer(FastHttpUser):
    """One buyer, one pass: join, wait, reserve, pay, confirm; a "no" is asked again a few times."""

    host = "http://127.0.0.1"
    network_timeout = 30.0
    connection_timeout = 30.0

    def on_start(self) -> None:
        token = Plan.tokens.pop()
        self.headers = {"Authorization": f"Bearer {token}"}
        self.admission = ""

    def _call(self, method: str, path: str, step: str, **kwargs: Any):
        with self.client.request(
            method,
            path,
            name=step,
            headers={**self.headers, **kwargs.pop("headers", {})},
            catch_response=True,
            **kwargs,
        ) as answer:
            answer.success()  # every answer is data; the report sorts them by status and code
            return answer

    @task
    def buy(self) -> None:
        slug = Plan.slug
        if Plan.waiting_room and not self.wait_in_line(slug):
            raise StopUser()
        self.reserve_and_pay(slug)
        raise StopUser()

    def wait_in_line(self, slug: str) -> bool:
        """Join, then poll with the queue ticket until admitted (True) or told no (False)."""
        joined = self._call("POST", f"/api/drops/{slug}/queue", "join")
        while joined.status_code in (429, 503):
            gevent.sleep(float(joined.headers.get("Retry-After") or 1))
            joined = self._call("POST", f"/api/drops/{slug}/queue", "join")
        if joined.status_code != 200:
            return False
        body = joined.json()
        while not body.get("admission_token"):
            if body.get("state") in ("sold_out", "ended", "closed"):
                return False
            gevent.sleep(0.5)
            polled = self._call(
                "GET",
                f"/api/drops/{slug}/queue",
                "queue poll",
                headers={"X-Queue-Ticket": body.get("queue_ticket") or ""},
            )
            if polled.status_code == 410:
                return False
            if polled.status_code == 200:
                body = {**body, **polled.json()}
        self.admission = str(body["admission_token"])
        return True

    def reserve_and_pay(self, slug: str) -> None:
        headers = {"Idempotency-Key": uuid.uuid4().hex, "X-Admission-Token": self.admission}
        body: dict[str, object] = {"quantity": 1}
        if Plan.sizes:
            body["variant"] = random.choices(list(Plan.sizes), weights=list(Plan.sizes.values()))[0]
        noes = 0
        while True:
            held = self._call("POST", f"/api/drops/{slug}/holds", "reserve", json=body, headers=headers)
            if held.status_code in (200, 201):
                break
            if held.status_code in (425, 429, 503):  # not started, or told to come back
                gevent.sleep(float(held.headers.get("Retry-After") or 0.5))
                continue
            left = held.json().get("left") if held.status_code == 409 else None
            if left:  # the size asked for is gone: a buyer takes another that is left (a new request)
                body["variant"] = random.choice(left)
                headers["Idempotency-Key"] = uuid.uuid4().hex
                continue
            noes += 1
            if noes > STEPS_AFTER_NO:
                return
            gevent.sleep(1)
        hold_id = held.json()["id"]
        if Plan.ship_to and not self.give_address(hold_id):
            return
        for _card in range(CARDS):
            if self.pay(hold_id):
                return

    def give_address(self, hold_id: str) -> bool:
        """The address step of a product that ships, as the hold page asks it before payment."""
        address = {
            "name": "Rehearsal Buyer",
            "line1": "Probestraße 1",
            "postal_code": "10115",
            "city": "Berlin",
            "country": Plan.ship_to,
        }
        return self._call("PUT", f"/api/holds/{hold_id}/address", "address", json=address).status_code == 200

    def pay(self, hold_id: str) -> bool:
        """Start paying, pay at the provider, poll the order: True once confirmed, False on a decline."""
        started = self._call("POST", f"/api/holds/{hold_id}/payment", "pay")
        if started.status_code != 202:
            return False
        paid = self._call(
            "POST", started.json()["redirect_url"], "provider", data={"action": "pay"}, allow_redirects=False
        )
        if paid.status_code != 303:
            return False
        # a buyer who paid waits for the answer (paying again while it is pending is not a buyer's way)
        deadline = time.monotonic() + CONFIRM_PATIENCE
        while time.monotonic() < deadline:
            orders = self._call("GET", "/api/orders", "confirm poll").json().get("orders", [])
            mine = [o for o in orders if o["hold"] == hold_id]
            if any(o["state"] == "confirmed" for o in mine):
                return True
            if mine and all(o["state"] == "failed" for o in mine):
                return False  # declined (the simulator declines some cards): the hold stays, try again
            gevent.sleep(0.5)
        return False


def main(plan_path: str, events_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    Plan.base, Plan.slug, Plan.waiting_room = plan["base"], plan["slug"], plan["waiting_room"]
    Plan.tokens, Plan.max_seconds = list(plan["tokens"]), float(plan["max_seconds"])
    Plan.sizes, Plan.ship_to = dict(plan.get("sizes") or {}), str(plan.get("ship_to") or "")
    Buyer.host = Plan.base
    started = time.monotonic()
    with open(events_path, "w", newline="") as out:
        writer = csv.writer(out)

        @events.request.add_listener
        def record(request_type: str, name: str, response_time: float, response: object, **_: object) -> None:
            status = getattr(response, "status_code", 0) or 0
            code = ""
            if status >= 400:
                try:
                    body = response.json()  # type: ignore[attr-defined]
                    code = str(body.get("error") or body.get("code") or "")
                except Exception:
                    code = ""
            writer.writerow([f"{time.monotonic() - started:.3f}", name, status, code, f"{response_time:.1f}"])

        env = Environment(user_classes=[Buyer], events=events)
        runner = env.create_local_runner()
        count = len(Plan.tokens)
        runner.start(count, spawn_rate=float(plan.get("spawn_rate", count)))
        gevent.sleep(1)
        while runner.user_count > 0 and time.monotonic() - started < Plan.max_seconds:
            gevent.sleep(0.5)
            out.flush()
        runner.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
