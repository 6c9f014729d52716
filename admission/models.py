"""The waiting room: one queue per drop, one ticket per buyer, and a record of each wave."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class BeaconStatus(models.TextChoices):
    """Where the draw's public randomness stands (admission/beacon.py)."""

    NONE = "none", _("no beacon named: the seed and the entry list alone")
    WAITING = "waiting", _("a round is named; it is read at the draw")
    VERIFIED = "verified", _("the round was read and its signature verified")
    UNREACHABLE = "unreachable", _("the round could not be read: the committed seed alone")


class Queue(models.Model):
    """A drop's line: the draw that orders early joiners, and the admitted-through mark."""

    drop = models.OneToOneField(
        "shop.Drop", primary_key=True, on_delete=models.CASCADE, related_name="queue", verbose_name=_("drop")
    )
    # The seed stays secret until the draw; its SHA-256 is shown before, so nobody can pick it late.
    seed = models.CharField(max_length=64, verbose_name=_("seed"))
    seed_sha256 = models.CharField(max_length=64, verbose_name=_("seed sha256"))
    drawn_at = models.DateTimeField(null=True, blank=True, verbose_name=_("drawn at"))
    drawn_entries = models.PositiveIntegerField(
        default=0, help_text=_("Early joiners put in random order."), verbose_name=_("drawn entries")
    )
    # Fixed by the draw (admission/draw.py): the closed entry list's hash, and the beacon value mixed in.
    entries_sha256 = models.CharField(max_length=64, blank=True, default="", verbose_name=_("entries sha256"))
    beacon = models.CharField(max_length=200, blank=True, default="", verbose_name=_("beacon"))
    # Named with the seed, before any join (admission/beacon.py): a drand chain and the first round
    # due after the entry list closes. The list closes at the start (its hash published then); the
    # order waits for the round, whose signature is kept to be checked by anyone.
    # (Database defaults: code from before these columns still inserts queues.)
    beacon_chain = models.CharField(
        max_length=64,
        blank=True,
        db_default="",
        help_text=_("drand chain hash"),
        verbose_name=_("beacon chain"),
    )
    beacon_round = models.PositiveBigIntegerField(null=True, blank=True, verbose_name=_("beacon round"))
    beacon_status = models.CharField(
        max_length=16,
        choices=BeaconStatus.choices,
        db_default=BeaconStatus.NONE.value,
        verbose_name=_("beacon status"),
    )
    beacon_signature = models.CharField(
        max_length=400, blank=True, db_default="", verbose_name=_("beacon signature")
    )
    beacon_previous_signature = models.CharField(
        max_length=400, blank=True, db_default="", verbose_name=_("beacon previous signature")
    )
    beacon_note = models.CharField(
        max_length=300,
        blank=True,
        db_default="",
        help_text=_("why the round was not used"),
        verbose_name=_("beacon note"),
    )
    entries_closed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("entries closed at"))
    # The hour before the start: does a relay answer with a round that verifies? (ops/preflight.py)
    preflight_at = models.DateTimeField(null=True, blank=True, verbose_name=_("beacon checked at"))
    preflight_ok = models.BooleanField(null=True, blank=True, verbose_name=_("beacon reachable"))
    preflight_note = models.CharField(
        max_length=300, blank=True, db_default="", verbose_name=_("beacon check note")
    )
    preflight_alerted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_("when the merchant was told"),
        verbose_name=_("beacon alert sent at"),
    )
    admitted_through = models.PositiveIntegerField(
        default=0, help_text=_("Tickets up to this are admitted."), verbose_name=_("admitted through")
    )
    # Returned units go to the next tickets in number order (sale/offers.py): the highest ticket
    # offered one so far (what the pages and the edge go by; the offerer asks the tickets themselves).
    offered_through = models.PositiveIntegerField(
        default=0,
        help_text=_("Tickets up to this have been offered a returned unit or had one."),
        verbose_name=_("offered through"),
    )
    last_wave_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last wave at"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))

    class Meta:
        verbose_name = _("queue")
        verbose_name_plural = _("queues")

    def __str__(self) -> str:
        return f"queue of drop {self.drop_id} (through {self.admitted_through})"


class Ticket(models.Model):
    """A buyer's place. `id` is the public entry number; `number` the place in line.

    Early joiners have no number until the draw at the start; later ones get the next number.
    """

    id = models.BigAutoField(primary_key=True, verbose_name=_("id"))
    # No index of its own: both unique constraints below lead with the drop. One index fewer to
    # write for each of the draw's numbered rows (a fifth of its time at 50,000 entries).
    drop = models.ForeignKey(
        "shop.Drop",
        on_delete=models.CASCADE,
        related_name="tickets",
        verbose_name=_("drop"),
        db_index=False,
    )
    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tickets", verbose_name=_("buyer")
    )
    number = models.PositiveIntegerField(null=True, blank=True, verbose_name=_("number"))
    joined_at = models.DateTimeField(db_default=Now(), verbose_name=_("joined at"))

    class Meta:
        verbose_name = _("ticket")
        verbose_name_plural = _("tickets")
        constraints = [
            models.UniqueConstraint(fields=["drop", "buyer"], name="admission_ticket_one_per_buyer"),
            models.UniqueConstraint(fields=["drop", "number"], name="admission_ticket_number_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="admission_ticket_number_positive"),
        ]

    def __str__(self) -> str:
        return f"ticket {self.number or '(before the draw)'} of drop {self.drop_id}"


class Wave(models.Model):
    """One advance of the mark: the measured pace and the dashboard's history come from here."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="waves", verbose_name=_("drop")
    )
    at = models.DateTimeField(db_default=Now(), verbose_name=_("at"))
    admitted_through = models.PositiveIntegerField(verbose_name=_("admitted through"))
    admitted = models.PositiveIntegerField(verbose_name=_("admitted"))
    available = models.PositiveIntegerField(verbose_name=_("available"))
    held = models.PositiveIntegerField(verbose_name=_("held"))

    class Meta:
        verbose_name = _("wave")
        verbose_name_plural = _("waves")
        indexes = [models.Index(fields=["drop", "-at"], name="admission_wave_drop_at")]

    def __str__(self) -> str:
        return f"wave of drop {self.drop_id} through {self.admitted_through}"
