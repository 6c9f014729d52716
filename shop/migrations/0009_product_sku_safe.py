"""SKUs limited to a safe alphabet; the ones already outside it are renamed first."""

import re

import django.core.validators
from django.db import migrations, models

SAFE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
MESSAGE = (
    "A SKU may use letters, digits, '.', '-' and '_', and starts with a letter or digit (e.g. TEE-BLK-42)."
)


def clean_skus(apps, schema_editor) -> None:
    """Each character outside the alphabet becomes '-' (a leading dot or dash goes), kept unique
    with a numbered suffix: `../../etc/passwd` becomes `etc-passwd`."""
    Product = apps.get_model("shop", "Product")
    taken = set(Product.objects.values_list("sku", flat=True))
    for product in Product.objects.exclude(sku__regex=SAFE).order_by("pk"):
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", product.sku).lstrip("._-")[:56] or "SKU"
        new, n = base, 1
        while new in taken:
            n += 1
            new = f"{base}-{n}"
        taken.discard(product.sku)
        taken.add(new)
        product.sku = new
        product.save(update_fields=["sku"])


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0008_drop_offer_seconds"),
    ]

    operations = [
        migrations.RunPython(clean_skus, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="product",
            name="sku",
            field=models.CharField(
                help_text="Letters, digits, '.', '-' and '_' (e.g. TEE-BLK-42).",
                max_length=64,
                unique=True,
                validators=[django.core.validators.RegexValidator(SAFE, MESSAGE)],
                verbose_name="SKU",
            ),
        ),
        migrations.AddConstraint(
            model_name="product",
            constraint=models.CheckConstraint(
                condition=models.Q(("sku__regex", SAFE)),
                name="shop_product_sku_safe",
                violation_error_message=MESSAGE,
            ),
        ),
    ]
