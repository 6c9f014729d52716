import django.db.models.deletion
from django.db import migrations, models

# Existing stock rows belong to their drop's one variant (shop 0013 made it).
FILL = """
UPDATE inventory_stockbucket b SET variant_id = v.id FROM shop_variant v WHERE v.drop_id = b.drop_id;
UPDATE inventory_unit u SET variant_id = v.id FROM shop_variant v WHERE v.drop_id = u.drop_id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0002_returned_units"),
        ("shop", "0013_variants"),
    ]

    operations = [
        migrations.AddField(
            model_name="stockbucket",
            name="variant",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="shop.variant",
            ),
        ),
        migrations.AddField(
            model_name="unit",
            name="variant",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="shop.variant",
            ),
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="stockbucket",
            name="variant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="shop.variant",
            ),
        ),
        migrations.AlterField(
            model_name="unit",
            name="variant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="shop.variant",
            ),
        ),
        migrations.RemoveIndex(model_name="unit", name="inventory_unit_claimable"),
        migrations.AddIndex(
            model_name="unit",
            index=models.Index(
                condition=models.Q(("state", "available")),
                fields=["drop", "variant", "rank"],
                name="inventory_unit_claimable",
            ),
        ),
    ]
