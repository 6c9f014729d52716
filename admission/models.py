"""The waiting room: one queue per drop, one ticket per buyer, and a record of each wave."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now


class BeaconStatus(models.TextChoices):
    """Where the draw's public randomness stands (admission/beacon.py)."""

    NONE = "none", "no beacon named: the seed and the entry list alone"
    WAITING = "waiting", "a round is named; it is read at the draw"
    VERIFIED = "verified", "the round was read and its signature verified"
    UNREACHABLE = "unreachable", "the round could not be read: the committed seed alone"


class Queue(models.Model):
    """A drop's line: the draw that orders early joiners, and the admitted-through mark."""

    drop = models.OneToOneField("shop.Drop", primary_key=True, on_delete=models.CASCADE, related_name="queue")
    # The seed stays secret until the draw; its SHA-256 is shown before, so nobody can pick it late.
    seed = models.CharField(max_length=64)
    seed_sha256 = models.CharField(max_length=64)
    drawn_at = models.DateTimeField(null=True, blank=True)
    drawn_entries = models.PositiveIntegerField(default=0, help_text="Early joiners put in random order.")
    # Fixed by the draw (admission/draw.py): the closed entry list's hash, and the beacon value mixed in.
    entries_sha256 = models.CharField(max_length=64, blank=True, default="")
    beacon = models.CharField(max_length=200, blank=True, default="")
    # Named with the seed, before any join (admission/beacon.py): a drand chain and the first round
    # due after the entry list closes. The list closes at the start (its hash published then); the
    # order waits for the round, whose signature is kept to be checked by anyone.
    # (Database defaults: code from before these columns still inserts queues.)
    beacon_chain = models.CharField(max_length=64, blank=True, db_default="", help_text="drand chain hash")
    beacon_round = models.PositiveBigIntegerField(null=True, blank=True)
    beacon_status = models.CharField(
        max_length=16, choices=BeaconStatus.choices, db_default=BeaconStatus.NONE.value
    )
    beacon_signature = models.CharField(max_length=400, blank=True, db_default="")
    beacon_previous_signature = models.CharField(max_length=400, blank=True, db_default="")
    beacon_note = models.CharField(
        max_length=300, blank=True, db_default="", help_text="why the round was not used"
    )
    entries_closed_at = models.DateTimeField(null=True, blank=True)
    admitted_through = models.PositiveIntegerField(default=0, help_text="Tickets up to this are admitted.")
    # Returned units go to the next tickets in number order (sale/offers.py): the highest ticket
    # offered one so far (what the pages and the edge go by; the offerer asks the tickets themselves).
    offered_through = models.PositiveIntegerField(
        default=0, help_text="Tickets up to this have been offered a returned unit or had one."
    )
    last_wave_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"queue of drop {self.drop_id} (through {self.admitted_through})"


class Ticket(models.Model):
    """A buyer's place. `id` is the public entry number; `number` the place in line.

    Early joiners have no number until the draw at the start; later ones get the next number.
    """

    id = models.BigAutoField(primary_key=True)
    drop = models.ForeignKey("shop.Drop", on_delete=models.CASCADE, related_name="tickets")
    buyer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tickets")
    number = models.PositiveIntegerField(null=True, blank=True)
    joined_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["drop", "buyer"], name="admission_ticket_one_per_buyer"),
            models.UniqueConstraint(fields=["drop", "number"], name="admission_ticket_number_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="admission_ticket_number_positive"),
        ]

    def __str__(self) -> str:
        return f"ticket {self.number or '(before the draw)'} of drop {self.drop_id}"


class Wave(models.Model):
    """One advance of the mark: the measured pace and the dashboard's history come from here."""

    drop = models.ForeignKey("shop.Drop", on_delete=models.CASCADE, related_name="waves")
    at = models.DateTimeField(db_default=Now())
    admitted_through = models.PositiveIntegerField()
    admitted = models.PositiveIntegerField()
    available = models.PositiveIntegerField()
    held = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["drop", "-at"], name="admission_wave_drop_at")]

    def __str__(self) -> str:
        return f"wave of drop {self.drop_id} through {self.admitted_through}"
