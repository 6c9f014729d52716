"""A product's tax rate, percent, 0 up to (not including) 100; existing products start at 0."""

from decimal import Decimal

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0010_rehearsals"),
    ]

    operations = [
        migrations.AddField(
            model_name="product",
            name="tax_rate",
            field=models.DecimalField(
                db_default=Decimal("0"),
                decimal_places=2,
                default=Decimal("0"),
                help_text="Percent, e.g. 19.00; 0 for none. Whether prices include it is the shop's "
                "setting (PRICES_INCLUDE_TAX).",
                max_digits=5,
                validators=[
                    django.core.validators.MinValueValidator(
                        Decimal("0"),
                        "A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.",
                    ),
                    django.core.validators.MaxValueValidator(
                        Decimal("99.99"),
                        "A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.",
                    ),
                ],
                verbose_name="tax rate (%)",
            ),
        ),
        migrations.AddConstraint(
            model_name="product",
            constraint=models.CheckConstraint(
                condition=models.Q(("tax_rate__gte", 0), ("tax_rate__lt", 100)),
                name="shop_product_tax_rate_range",
                violation_error_message="A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.",
            ),
        ),
    ]
