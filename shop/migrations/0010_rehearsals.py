"""Rehearsals hidden from real buyers: the copy names its drop, the made-up buyers their copy.

shop.rehearse_drop is granted to no group: whoever may aim a crowd at the shop is chosen by hand.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("shop", "0009_product_sku_safe"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="drop",
            options={
                "ordering": ["starts_at"],
                "permissions": [
                    ("pause_drop", "Can pause and resume a drop (kill switch)"),
                    ("rehearse_drop", "Can rehearse a drop (a crowd of made-up buyers on a hidden copy)"),
                ],
            },
        ),
        migrations.AddField(
            model_name="drop",
            name="rehearsal_of",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="rehearsals",
                to="shop.drop",
            ),
        ),
        migrations.CreateModel(
            name="RehearsalBuyer",
            fields=[
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="rehearsal",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "drop",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rehearsal_buyers",
                        to="shop.drop",
                    ),
                ),
            ],
        ),
    ]
