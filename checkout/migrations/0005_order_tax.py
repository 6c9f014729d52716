"""Orders keep their tax: the rate and the tax as they were when payment started; net is generated.

Orders from before have tax 0 at rate 0, so net = amount: every product's rate was 0 until now
(shop 0011 adds it with that default), which is exactly what computing them would give, and a
receipt already sent is not rewritten with a rate nobody set at the time.
"""

from decimal import Decimal

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("checkout", "0004_merchants_refund"),
    ]

    operations = [
        migrations.AddField(
            model_name="order",
            name="tax_minor",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="order",
            name="tax_rate",
            field=models.DecimalField(
                db_default=Decimal("0"), decimal_places=2, default=Decimal("0"), max_digits=5
            ),
        ),
        migrations.AddField(
            model_name="order",
            name="net_minor",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.F("amount_minor") - models.F("tax_minor"),
                output_field=models.BigIntegerField(),
            ),
        ),
        migrations.AlterField(
            model_name="order",
            name="amount_minor",
            field=models.BigIntegerField(help_text="The gross: what the provider charges."),
        ),
        migrations.AddConstraint(
            model_name="order",
            constraint=models.CheckConstraint(
                condition=models.Q(("tax_minor__gte", 0), ("tax_minor__lte", models.F("amount_minor"))),
                name="checkout_order_tax_within_amount",
            ),
        ),
    ]
