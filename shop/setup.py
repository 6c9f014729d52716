"""Setting up the shop: its identity written (the admin's Shop page, `configure_shop`, the demo)
and the legal pages it lacks written from their templates. Reads go through shop.identity, whose
cached copies are dropped after the commit."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from shop import identity, legal
from shop.models import ShopSettings, normal_colour, normal_vat_id


def save_row(row: ShopSettings) -> None:
    """Keep a validated row as the identity, inside the caller's transaction; the caches follow
    the commit. Fills in the legal pages not yet written from their templates."""
    assert transaction.get_connection().in_atomic_block, "save_row runs inside a transaction"
    row.pk = 1
    row.configured_at = timezone.now()
    row.save()
    transaction.on_commit(identity.forget)
    legal.seed(identity=identity.from_row(row))


def configure(
    *,
    name: str,
    legal_name: str,
    address: str,
    contact_email: str,
    vat_id: str | None = None,
    logo: UploadedFile[bytes] | None = None,
    accent_colour: str | None = None,
    support_url: str | None = None,
    prices_include_tax: bool | None = None,
) -> ShopSettings:
    """Set the identity (options left None keep their value). Bad input raises InvalidInput naming
    every bad field, and nothing changes: not the row, not the stored logo."""
    with transaction.atomic(durable=True):
        row = ShopSettings.objects.select_for_update().filter(pk=1).first()
        if row is None:
            row = ShopSettings(pk=1, prices_include_tax=settings.PRICES_INCLUDE_TAX)
        row.name, row.legal_name, row.contact_email = name.strip(), legal_name.strip(), contact_email.strip()
        row.address = address.replace("\\n", "\n").strip()  # a shell's one line may carry \n for breaks
        if vat_id is not None:
            row.vat_id = normal_vat_id(vat_id)
        if accent_colour is not None:
            row.accent_colour = normal_colour(accent_colour)
        if support_url is not None:
            row.support_url = support_url.strip()
        if prices_include_tax is not None:
            row.prices_include_tax = prices_include_tax
        kept = identity.cleaned_logo(logo) if logo is not None else None
        try:
            row.full_clean(exclude=["logo"])
        except ValidationError as error:
            raise InvalidInput(_problems(error)) from None
        if kept is not None:
            row.logo.save(kept.name or "logo.png", kept, save=False)  # only once every field is valid
        save_row(row)
    return row


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{field}: {' '.join(str(m) for m in messages)}" for field, messages in error.message_dict.items()
    )
