"""Seed the demo drop (live a minute from now), a sample shop identity and an admin login; safe to
run on every start."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from catalogue import services
from shop import setup
from shop.models import Drop, Product, ShopSettings

DEMO_SLUG = "demo-sneaker"
DEMO_SKU = "DEMO-SNEAKER"
DEMO_DESCRIPTION = (
    "The Harbour Lane Runner in its launch colours: a white knit upper, a blue heel counter and an "
    "orange foam sole that gives back what you put in.\n\n"
    "Breathable engineered mesh, recycled laces, a removable cushioned insole. "
    "Made in a numbered run of 100 pairs; this edition will not be made again."
)


# The demo's shop: a made-up seller (a merchant's own, set in the admin or by configure_shop, stays).
DEMO_SHOP = {
    "name": "Harbour Lane Sneakers",
    "legal_name": "Harbour Lane Sneakers GmbH (demo)",
    "address": "Hafenstraße 1\n20457 Hamburg\nGermany",
    "contact_email": "hello@harbour-lane.example",
    "vat_id": "DE123456789",
    "accent_colour": "#0b6bcb",
}

# A sneaker drop as they are sold: in sizes (the largest costs more), taxed, and shipped, so a
# newcomer meets the size picker and the address step.
DEMO_SIZES = [
    services.NewVariant("40", 15),
    services.NewVariant("41", 20),
    services.NewVariant("42", 25),
    services.NewVariant("43", 25),
    services.NewVariant("44", 15, 13900),
]
DEMO_ZONES = ["Germany:DE:490", "EU:AT,BE,DK,ES,FR,IT,LU,NL,PL:990"]


class Command(BaseCommand):
    help = (
        "Create the demo drop (100 pairs in sizes 40-44, shipped in the EU, live in 60 seconds) or "
        "re-arm it while nobody has bought or queued; create the admin account. Run again, it adds "
        "no second drop."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--admin-password", required=True)
        parser.add_argument(
            "--keep-admin-password",
            action="store_true",
            help="Set the password only when the admin account is new (a restart keeps the one in use).",
        )
        parser.add_argument("--starts-in", type=int, default=60)
        parser.add_argument("--new", action="store_true", help="Add another demo drop even if one exists.")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        User = get_user_model()
        admin, created = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        admin.is_staff = admin.is_superuser = True
        if created or not opts["keep_admin_password"]:
            admin.set_password(str(opts["admin_password"]))
        admin.save()

        with transaction.atomic():
            if not ShopSettings.objects.filter(pk=1).exists():
                setup.save_row(ShopSettings(**DEMO_SHOP, prices_include_tax=settings.PRICES_INCLUDE_TAX))
                self.stdout.write(
                    f"demo shop identity: {DEMO_SHOP['name']} (change it in the admin's Shop page)"
                )

        starts_at = timezone.now() + timedelta(seconds=int(opts["starts_in"]))
        ends_at = starts_at + timedelta(hours=2)
        existing = Drop.objects.filter(slug=DEMO_SLUG).first()
        if existing is not None and not opts["new"]:
            if existing.holds.exists() or existing.tickets.exists():
                # Buyers' holds and places are real data: the drop stays as they left it.
                self.stdout.write(f"demo drop /drops/{DEMO_SLUG}/ kept as it is (it has buyers)")
                return
            Drop.objects.filter(pk=existing.pk).update(
                starts_at=starts_at, ends_at=ends_at, waiting_room=True
            )
            slug = DEMO_SLUG
        else:
            slug = DEMO_SLUG if existing is None else f"{DEMO_SLUG}-{timezone.now():%Y%m%d-%H%M%S}"
            known = Product.objects.filter(sku=DEMO_SKU).exists()
            services.create_drop(
                slug=slug,
                quantity=100,
                starts_at=starts_at,
                ends_at=ends_at,
                product_sku=DEMO_SKU,
                product_name="Harbour Lane Runner, launch edition",
                price_minor=12900,
                tax_rate=Decimal(19),
                ships=True,
                # zones come with a new product (another demo drop sells the same one)
                shipping_zones=None if known else [services.zone_from(zone) for zone in DEMO_ZONES],
                variants=DEMO_SIZES,
                title="Harbour Lane Runner — launch edition",
                bucket_count=4,
                waiting_room=True,  # buyers queue, and are admitted in waves as the stock allows
            )
        # Its picture is static/img/products/demo-sneaker.svg (found by SKU); a merchant's edit wins.
        Product.objects.filter(sku=DEMO_SKU, description="").update(description=DEMO_DESCRIPTION)
        self.stdout.write(f"demo drop /drops/{slug}/ goes live at {starts_at:%H:%M:%S} UTC")
