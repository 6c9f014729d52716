import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("holds", "0004_hold_shipping_address"),
        ("shop", "0013_variants"),
    ]

    operations = [
        migrations.AddField(
            model_name="hold",
            name="variant",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="shop.variant",
            ),
        ),
        # Holds made before variants are of their drop's one variant.
        migrations.RunSQL(
            "UPDATE holds_hold h SET variant_id = v.id FROM shop_variant v WHERE v.drop_id = h.drop_id",
            migrations.RunSQL.noop,
        ),
    ]
